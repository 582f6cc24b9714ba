package check

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// checkPodTaskRole: with rbac cluster or namespace, the delegate gets a
// Role of its own namespace for container tasks as pods whose rules are
// the ones docs/task-containers.md documents (pods, pods/log, events,
// secrets), bound to its ServiceAccount; none with rbac none.
func checkPodTaskRole(t *testing.T, objs []k8sObject, rbac string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/task-containers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(b), "<!-- pod-tasks-role -->\n```yaml\n")
	block, _, _ := strings.Cut(after, "```")
	var doc rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(block), &doc); err != nil || len(doc.Rules) == 0 {
		t.Fatalf("docs/task-containers.md: the pod-tasks Role: %v", err)
	}
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *rbacv1.Role:
			if strings.HasSuffix(v.Name, "-pod-tasks") {
				role = v
			}
		case *rbacv1.RoleBinding:
			if strings.HasSuffix(v.Name, "-pod-tasks") {
				binding = v
			}
		}
	}
	if rbac == "none" {
		if role != nil || binding != nil {
			t.Error("rbac none: a pod-tasks Role is there")
		}
		return
	}
	if role == nil || binding == nil {
		t.Fatalf("rbac %s: no pod-tasks Role and RoleBinding", rbac)
	}
	if d := cmp.Diff(doc.Rules, role.Rules); d != "" {
		t.Errorf("the pod-tasks Role's rules vs the documented ones (-docs +manifest):\n%s", d)
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Namespace != role.Namespace {
		t.Errorf("the pod-tasks RoleBinding: %+v", binding)
	}
}
