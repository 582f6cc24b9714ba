package kube

import (
	"errors"
	"strings"
	"testing"
)

func TestRolloutStatus(t *testing.T) {
	t.Parallel()
	three := int32(3)
	w := func(edit func(*workload)) *workload {
		var x workload
		x.Metadata.Generation, x.Status.ObservedGeneration = 2, 2
		x.Spec.Replicas = &three
		edit(&x)
		return &x
	}
	tests := []struct {
		name, kind string
		w          *workload
		done       bool
		msg, err   string
	}{
		{"not observed", "Deployment", w(func(x *workload) { x.Status.ObservedGeneration = 1 }), false, "waiting for the controller to see the new spec", ""},
		{"updating", "Deployment", w(func(x *workload) { x.Status.UpdatedReplicas = 1 }), false, "1 of 3 replicas updated", ""},
		{"old pending", "Deployment", w(func(x *workload) { x.Status.UpdatedReplicas, x.Status.Replicas = 3, 4 }), false, "1 old replicas pending termination", ""},
		{"unavailable", "Deployment", w(func(x *workload) { x.Status.UpdatedReplicas, x.Status.Replicas, x.Status.AvailableReplicas = 3, 3, 2 }), false, "2 of 3 updated replicas available", ""},
		{"complete", "Deployment", w(func(x *workload) { x.Status.UpdatedReplicas, x.Status.Replicas, x.Status.AvailableReplicas = 3, 3, 3 }), true, "3 of 3 replicas updated and available", ""},
		{"deadline", "Deployment", w(func(x *workload) {
			x.Status.Conditions = []condition{{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-1" has timed out progressing.`}}
		}), false, "", `rollout stuck: ReplicaSet "web-1" has timed out progressing.`},
		{"sts ready", "StatefulSet", w(func(x *workload) { x.Status.ReadyReplicas = 2 }), false, "2 of 3 replicas ready", ""},
		{"sts revision", "StatefulSet", w(func(x *workload) {
			x.Status.ReadyReplicas, x.Status.UpdateRevision, x.Status.CurrentRevision = 3, "b", "a"
		}), false, "0 of 3 replicas updated", ""},
		{"sts done", "StatefulSet", w(func(x *workload) {
			x.Status.ReadyReplicas, x.Status.UpdateRevision, x.Status.CurrentRevision = 3, "b", "b"
		}), true, "3 of 3 replicas ready at revision b", ""},
		{"sts on delete", "StatefulSet", w(func(x *workload) { x.Spec.UpdateStrategy.Type = "OnDelete" }), true, "update strategy OnDelete: not waited for", ""},
		{"ds updating", "DaemonSet", w(func(x *workload) { x.Status.DesiredNumberScheduled, x.Status.UpdatedNumberScheduled = 2, 1 }), false, "1 of 2 pods updated", ""},
		{"ds done", "DaemonSet", w(func(x *workload) {
			x.Status.DesiredNumberScheduled, x.Status.UpdatedNumberScheduled, x.Status.NumberAvailable = 2, 2, 2
		}), true, "2 of 2 pods updated and available", ""},
	}
	for _, tt := range tests {
		done, msg, err := rolloutStatus(tt.kind, tt.w)
		if tt.err != "" {
			if !errors.Is(err, errStuck) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || done != tt.done || msg != tt.msg {
			t.Errorf("%s: = %v %q %v, want %v %q", tt.name, done, msg, err, tt.done, tt.msg)
		}
	}
}

func TestLabelSelector(t *testing.T) {
	t.Parallel()
	var s labelSelector
	s.MatchLabels = map[string]string{"b": "2", "a": "1"}
	s.MatchExpressions = append(s.MatchExpressions,
		struct {
			Key      string   `json:"key"`
			Operator string   `json:"operator"`
			Values   []string `json:"values"`
		}{"tier", "In", []string{"web", "api"}},
		struct {
			Key      string   `json:"key"`
			Operator string   `json:"operator"`
			Values   []string `json:"values"`
		}{"canary", "DoesNotExist", nil})
	if got := s.String(); got != "a=1,b=2,tier in (web,api),!canary" {
		t.Fatalf("selector %q", got)
	}
}
