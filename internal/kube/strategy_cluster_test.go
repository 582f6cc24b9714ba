package kube

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/k8stest"
)

// dbStatefulSet is a StatefulSet of 3 replicas running image; neverReady
// labels its pods so that kwok never makes them Ready.
func dbStatefulSet(image string, neverReady bool) string {
	extra := ""
	if neverReady {
		extra = `, kwok.local/never-ready: "true"`
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, labels: {app: db}}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db%s}}
    spec:
      containers:
        - {name: db, image: %q}
`, extra, image)
}

type statefulSet struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		ReadyReplicas   int    `json:"readyReplicas"`
		UpdatedReplicas int    `json:"updatedReplicas"`
		CurrentRevision string `json:"currentRevision"`
		UpdateRevision  string `json:"updateRevision"`
	} `json:"status"`
}

// TestClusterStatefulSetRollback: a StatefulSet version whose pods never
// become Ready fails within the timeout and is rolled back to the
// ControllerRevision from before (as kubectl rollout undo does, plus the
// forced part a StatefulSet needs: its stuck pod is replaced); the
// cluster's StatefulSet runs the old image on all its pods again.
func TestClusterStatefulSetRollback(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	if o, _, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{dbStatefulSet("db:1", false)}, Timeout: 2 * time.Minute}); o != Succeeded {
		t.Fatalf("first deploy: %v %v", o, err)
	}
	var before statefulSet
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/statefulsets/db", nil, &before)
	r, out, err := runResult(t, c, Deploy{Namespace: ns, Manifests: []string{dbStatefulSet("db:2", true)}, Timeout: 8 * time.Second, Rollback: true})
	if o := r.Outcome; o != RolledBack || err == nil || !strings.Contains(err.Error(), "rolled back: statefulset/db: rollout not complete after 8s") {
		t.Fatalf("never-ready version: %v %v", o, err)
	}
	if !strings.Contains(out, "statefulset/db: rolled back to revision "+before.Status.UpdateRevision) {
		t.Errorf("output lacks the rollback to %s", before.Status.UpdateRevision)
	}
	if r.RolledBackTo != "1" || len(r.Workloads) != 1 || r.Workloads[0].Kind != "StatefulSet" || r.Workloads[0].Images[0] != "db:1" || r.Workloads[0].Revision != "3" {
		t.Errorf("the rollback's record: %+v", r)
	}
	var s statefulSet
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/statefulsets/db", nil, &s)
	if s.Spec.Template.Spec.Containers[0].Image != "db:1" || s.Spec.Template.Metadata.Labels["kwok.local/never-ready"] != "" ||
		s.Status.ReadyReplicas != 3 || s.Status.UpdatedReplicas != 3 || s.Status.UpdateRevision != before.Status.UpdateRevision ||
		s.Status.CurrentRevision != before.Status.UpdateRevision {
		t.Fatalf("after the rollback: %+v (before: %+v)", s, before)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"items"`
	}
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector=app%3Ddb", nil, &pods)
	for _, p := range pods.Items {
		if p.Metadata.Labels["controller-revision-hash"] != before.Status.UpdateRevision {
			t.Errorf("pod %s runs revision %s, want %s", p.Metadata.Name, p.Metadata.Labels["controller-revision-hash"], before.Status.UpdateRevision)
		}
	}
}

// deploymentNamed reads the Deployment name of ns; ok is false when it is
// not there.
func deploymentNamed(t *testing.T, k *k8stest.Cluster, ns, name string) (d deploymentFull, ok bool) {
	t.Helper()
	code, body, err := k.Request(t.Context(), "", http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/"+name, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code == http.StatusNotFound {
		return d, false
	}
	if code != http.StatusOK {
		t.Fatalf("GET deployment %s: HTTP %d %s", name, code, body)
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	return d, true
}

type deploymentFull struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		Generation  int64             `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		Replicas          int `json:"replicas"`
		UpdatedReplicas   int `json:"updatedReplicas"`
		AvailableReplicas int `json:"availableReplicas"`
	} `json:"status"`
}

func (d deploymentFull) image() string { return d.Spec.Template.Spec.Containers[0].Image }

// TestClusterCanary: a canary start makes web-canary with its share of the
// replicas (25% of 4, rounded up: 1; or a number given), its pods
// labelled legate.dev/track=canary and selected by the app's Service, and
// leaves the stable Deployment as it was; promote rolls the new version
// out to the stable Deployment and deletes the canary; abort deletes the
// canary and leaves the stable one as it was; a canary that never becomes
// Ready, with rollback auto, is deleted again.
func TestClusterCanary(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	web := func(image string, neverReady bool) []string {
		return []string{strings.Replace(webDeployment(image, neverReady), "replicas: 3", "replicas: 4", 1), webService}
	}
	if r, _, err := runResult(t, c, Deploy{Namespace: ns, Manifests: web("web:1", false), Timeout: 2 * time.Minute}); r.Outcome != Succeeded {
		t.Fatalf("first deploy: %v %v", r, err)
	}
	stable0, _ := deploymentNamed(t, k, ns, "web")
	if len(stable0.Spec.Template.Metadata.Labels) == 0 {
		t.Fatal("no stable Deployment")
	}
	checkStable := func(when, image string) {
		t.Helper()
		d, ok := deploymentNamed(t, k, ns, "web")
		if !ok || d.image() != image || d.Metadata.Generation != stable0.Metadata.Generation && image == "web:1" || d.Status.AvailableReplicas != 4 ||
			d.Spec.Template.Metadata.Labels[TrackLabel] != "" {
			t.Fatalf("%s: the stable Deployment: %+v", when, d)
		}
	}
	canary := Deploy{Namespace: ns, Manifests: web("web:2", false), Timeout: 2 * time.Minute, Strategy: StrategyCanary, Action: CanaryStart, CanaryPercent: 25}

	r, out, err := runResult(t, c, canary)
	if r.Outcome != Succeeded || err != nil || !strings.Contains(out, "deployment/web-canary: canary of deployment/web with 1 of its 4 replicas") ||
		!strings.Contains(out, "service/web: not applied by a canary start") {
		t.Fatalf("canary start: %+v %v", r, err)
	}
	cd, ok := deploymentNamed(t, k, ns, "web-canary")
	if !ok || cd.image() != "web:2" || cd.Spec.Replicas != 1 || cd.Status.AvailableReplicas != 1 || cd.Spec.Template.Metadata.Labels[TrackLabel] != "canary" ||
		cd.Spec.Template.Metadata.Labels["app"] != "web" || cd.Spec.Selector.MatchLabels[TrackLabel] != "canary" {
		t.Fatalf("the canary: %v %+v", ok, cd)
	}
	checkStable("after the canary start", "web:1")
	if len(r.Workloads) != 1 || r.Workloads[0].Name != "web-canary" || r.Workloads[0].Images[0] != "web:2" || r.Workloads[0].Revision != "1" {
		t.Fatalf("the start's record: %+v", r.Workloads)
	}
	// The Service selects the canary's pods as well as the stable ones.
	var svc serviceSel
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/services/web", nil, &svc)
	for key, v := range svc.Spec.Selector {
		if cd.Spec.Template.Metadata.Labels[key] != v || stable0.Spec.Template.Metadata.Labels[key] != v {
			t.Fatalf("the Service's selector %v does not select both the canary's and the stable pods", svc.Spec.Selector)
		}
	}

	// Abort: the canary goes, the stable one stays as it was.
	canary.Action = CanaryAbort
	r, _, err = runResult(t, c, canary)
	if r.Outcome != RolledBack || err != nil || r.RolledBackTo != "1" {
		t.Fatalf("abort: %+v %v", r, err)
	}
	if _, ok := deploymentNamed(t, k, ns, "web-canary"); ok {
		t.Fatal("the canary is still there after the abort")
	}
	checkStable("after the abort", "web:1")

	// A canary that never becomes Ready, with rollback auto, is deleted.
	bad := canary
	bad.Manifests, bad.Action, bad.Rollback, bad.Timeout, bad.CanaryPercent, bad.CanaryReplicas = web("web:3", true), CanaryStart, true, 5*time.Second, 0, 2
	r, _, err = runResult(t, c, bad)
	if r.Outcome != RolledBack || err == nil || !strings.Contains(err.Error(), "rolled back (canary deleted): deployment/web-canary: rollout not complete after 5s") {
		t.Fatalf("never-ready canary: %+v %v", r, err)
	}
	if _, ok := deploymentNamed(t, k, ns, "web-canary"); ok {
		t.Fatal("the never-ready canary is still there")
	}
	checkStable("after the failed canary", "web:1")

	// Start again with 2 replicas, then promote.
	canary.Action, canary.CanaryPercent, canary.CanaryReplicas = CanaryStart, 0, 2
	if r, _, err = runResult(t, c, canary); r.Outcome != Succeeded {
		t.Fatalf("second start: %+v %v", r, err)
	}
	if cd, ok := deploymentNamed(t, k, ns, "web-canary"); !ok || cd.Spec.Replicas != 2 || cd.Status.AvailableReplicas != 2 {
		t.Fatalf("the canary of 2: %+v", cd)
	}
	canary.Action = CanaryPromote
	r, _, err = runResult(t, c, canary)
	if r.Outcome != Succeeded || err != nil {
		t.Fatalf("promote: %+v %v", r, err)
	}
	if _, ok := deploymentNamed(t, k, ns, "web-canary"); ok {
		t.Fatal("the canary is still there after the promote")
	}
	d, _ := deploymentNamed(t, k, ns, "web")
	if d.image() != "web:2" || d.Status.UpdatedReplicas != 4 || d.Status.AvailableReplicas != 4 || d.Status.Replicas != 4 || d.Metadata.Annotations[RevisionAnnotation] != "2" {
		t.Fatalf("the stable Deployment after the promote: %+v", d)
	}
	if len(r.Workloads) != 1 || r.Workloads[0].Name != "web" || r.Workloads[0].Images[0] != "web:2" || r.Workloads[0].Revision != "2" {
		t.Fatalf("the promote's record: %+v", r.Workloads)
	}
}

type serviceSel struct {
	Spec struct {
		Selector map[string]string `json:"selector"`
	} `json:"spec"`
}

// TestClusterBlueGreen: a blue-green deploy runs web-blue, waits for it,
// then makes the Service select it; the next deploy runs web-green and
// switches to it, web-blue staying; swap-back switches to blue again; a
// green that never becomes Ready fails, the Service still selecting blue,
// and (rollback auto) green is deleted; a switch to a colour that is not
// ready is refused.
func TestClusterBlueGreen(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	selector := func() map[string]string {
		var s serviceSel
		k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/services/web", nil, &s)
		return s.Spec.Selector
	}
	bg := func(image string, neverReady bool, action string) Deploy {
		return Deploy{Namespace: ns, Manifests: []string{webDeployment(image, neverReady), webService}, Timeout: 2 * time.Minute,
			Strategy: StrategyBlueGreen, Action: action, Service: "web"}
	}
	r, out, err := runResult(t, c, bg("web:1", false, BlueGreenDeploy))
	if r.Outcome != Succeeded || err != nil || !strings.Contains(out, "service/web: selects colour blue (was no colour)") {
		t.Fatalf("first deploy: %+v %v", r, err)
	}
	if s := selector(); s[ColorLabel] != Blue || s["app"] != "web" {
		t.Fatalf("the Service after the first deploy: %v", s)
	}
	if d, ok := deploymentNamed(t, k, ns, "web-blue"); !ok || d.image() != "web:1" || d.Status.AvailableReplicas != 3 || d.Spec.Template.Metadata.Labels[ColorLabel] != Blue {
		t.Fatalf("web-blue: %+v", d)
	}

	r, _, err = runResult(t, c, bg("web:2", false, BlueGreenDeploy))
	if r.Outcome != Succeeded || err != nil || len(r.Workloads) != 1 || r.Workloads[0].Name != "web-green" || r.Workloads[0].Images[0] != "web:2" {
		t.Fatalf("second deploy: %+v %v", r, err)
	}
	if s := selector(); s[ColorLabel] != Green {
		t.Fatalf("the Service after the second deploy: %v", s)
	}
	if d, ok := deploymentNamed(t, k, ns, "web-green"); !ok || d.image() != "web:2" || d.Status.AvailableReplicas != 3 {
		t.Fatalf("web-green: %+v", d)
	}
	if d, ok := deploymentNamed(t, k, ns, "web-blue"); !ok || d.image() != "web:1" || d.Status.AvailableReplicas != 3 {
		t.Fatalf("web-blue after the switch (it stays): %+v", d)
	}

	// Swap back: blue serves again, green stays.
	r, _, err = runResult(t, c, bg("web:2", false, BlueGreenSwapBack))
	if r.Outcome != RolledBack || err != nil || r.RolledBackTo != Blue {
		t.Fatalf("swap back: %+v %v", r, err)
	}
	if s := selector(); s[ColorLabel] != Blue {
		t.Fatalf("the Service after the swap back: %v", s)
	}
	if _, ok := deploymentNamed(t, k, ns, "web-green"); !ok {
		t.Fatal("web-green is gone after the swap back")
	}
	// And switch: green again.
	if r, _, err = runResult(t, c, bg("web:2", false, BlueGreenSwitch)); r.Outcome != Succeeded || selector()[ColorLabel] != Green {
		t.Fatalf("switch: %+v %v %v", r, err, selector())
	}
	if r, _, err = runResult(t, c, bg("web:2", false, BlueGreenSwitch)); r.Outcome != Succeeded || selector()[ColorLabel] != Blue {
		t.Fatalf("switch back: %+v %v %v", r, err, selector())
	}

	// A never-ready green fails; the Service still selects blue.
	broken := bg("web:3", true, BlueGreenDeploy)
	broken.Timeout = 5 * time.Second
	r, _, err = runResult(t, c, broken)
	if r.Outcome != Failed || err == nil || !strings.Contains(err.Error(), "deployment/web-green: rollout not complete after 5s") ||
		!strings.Contains(err.Error(), "service/web still selects blue") {
		t.Fatalf("never-ready green: %+v %v", r, err)
	}
	if s := selector(); s[ColorLabel] != Blue {
		t.Fatalf("the Service after a never-ready green: %v", s)
	}
	// A switch to that green is refused: the Service never selects a colour that is not ready.
	r, _, err = runResult(t, c, bg("web:3", true, BlueGreenSwitch))
	if r.Outcome != Failed || err == nil || !strings.Contains(err.Error(), "deployment/web-green is not ready") || selector()[ColorLabel] != Blue {
		t.Fatalf("switch to a never-ready green: %+v %v %v", r, err, selector())
	}
	// With rollback auto the never-ready green is deleted.
	broken.Rollback = true
	r, _, err = runResult(t, c, broken)
	if r.Outcome != RolledBack || err == nil || r.RolledBackTo != Blue || selector()[ColorLabel] != Blue {
		t.Fatalf("never-ready green, rollback auto: %+v %v %v", r, err, selector())
	}
	if _, ok := deploymentNamed(t, k, ns, "web-green"); ok {
		t.Fatal("the never-ready green is still there after its rollback")
	}
	if d, ok := deploymentNamed(t, k, ns, "web-blue"); !ok || d.image() != "web:1" || d.Status.AvailableReplicas != 3 {
		t.Fatalf("web-blue after all: %+v", d)
	}
}

// TestClusterDaemonSetRollback: a DaemonSet version whose pods never
// become Ready is rolled back to the ControllerRevision from before; the
// cluster's DaemonSet runs the old image, its pods available.
func TestClusterDaemonSetRollback(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	ds := func(image string, neverReady bool) string {
		return strings.NewReplacer("kind: StatefulSet", "kind: DaemonSet", "  replicas: 3\n  serviceName: db\n", "").Replace(dbStatefulSet(image, neverReady))
	}
	if o, _, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{ds("db:1", false)}, Timeout: 2 * time.Minute}); o != Succeeded {
		t.Fatalf("first deploy: %v %v", o, err)
	}
	r, out, err := runResult(t, c, Deploy{Namespace: ns, Manifests: []string{ds("db:2", true)}, Timeout: 6 * time.Second, Rollback: true})
	if r.Outcome != RolledBack || err == nil || !strings.Contains(err.Error(), "rolled back: daemonset/db: rollout not complete after 6s") ||
		!strings.Contains(out, "daemonset/db: rolled back to revision db-") || r.RolledBackTo != "1" {
		t.Fatalf("never-ready version: %+v %v", r, err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
		Status struct {
			DesiredNumberScheduled int `json:"desiredNumberScheduled"`
			UpdatedNumberScheduled int `json:"updatedNumberScheduled"`
			NumberAvailable        int `json:"numberAvailable"`
		} `json:"status"`
	}
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/daemonsets/db", nil, &d)
	if d.Spec.Template.Spec.Containers[0].Image != "db:1" || d.Status.DesiredNumberScheduled == 0 ||
		d.Status.NumberAvailable != d.Status.DesiredNumberScheduled || d.Status.UpdatedNumberScheduled != d.Status.DesiredNumberScheduled {
		t.Fatalf("after the rollback: %+v", d)
	}
}
