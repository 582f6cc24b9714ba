package kube

import (
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
	o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{dbStatefulSet("db:2", true)}, Timeout: 8 * time.Second, Rollback: true})
	if o != RolledBack || err == nil || !strings.Contains(err.Error(), "rolled back: statefulset/db: rollout not complete after 8s") {
		t.Fatalf("never-ready version: %v %v", o, err)
	}
	if !strings.Contains(out, "statefulset/db: rolled back to revision "+before.Status.UpdateRevision) {
		t.Errorf("output lacks the rollback to %s", before.Status.UpdateRevision)
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

var _ = k8stest.Require
