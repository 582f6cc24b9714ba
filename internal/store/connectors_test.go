package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestConnectors(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		gh := Connector{AccountID: "acc1", Name: "github", URL: "https://github.example.com", Type: "git",
			Selectors: []string{"linux", "git"}, CreatedAt: t0}
		k8s := Connector{AccountID: "acc1", Name: "cluster", URL: "https://k8s.example.com:6443", Type: "kubernetes",
			CreatedAt: at(time.Minute)}
		other := Connector{AccountID: "acc2", Name: "github", URL: "https://other.example.com", CreatedAt: t0}
		// A verification provider keeps its CA, the secret names of its
		// bearer token or basic auth password, and the user name.
		prom := Connector{AccountID: "acc2", Name: "prom", URL: "https://prom.example.com/prometheus", Type: protocol.ProviderPrometheus,
			CAPEM: "-----BEGIN CERTIFICATE-----\n", Username: "reader", PasswordSecret: "prom-password", CreatedAt: t0}
		promTok := Connector{AccountID: "acc2", Name: "prom-tok", URL: "http://127.0.0.1:9090", Type: protocol.ProviderPrometheus,
			TokenSecret: "prom-token", CreatedAt: t0}
		for _, c := range []Connector{gh, k8s, other, prom, promTok} {
			if err := s.CreateConnector(ctx, c); err != nil {
				t.Fatalf("CreateConnector(%s): %v", c.Name, err)
			}
		}
		wantErr(t, "duplicate connector", s.CreateConnector(ctx, Connector{AccountID: "acc1", Name: "github", CreatedAt: t0}), ErrConflict)

		list, err := s.ListConnectors(ctx, "acc1")
		if diff := cmp.Diff([]Connector{k8s, gh}, list); err != nil || diff != "" {
			t.Errorf("ListConnectors error %v (-want +got):\n%s", err, diff)
		}
		got, err := s.GetConnector(ctx, "acc2", "github")
		if diff := cmp.Diff(other, got); err != nil || diff != "" {
			t.Errorf("GetConnector error %v (-want +got):\n%s", err, diff)
		}
		for _, want := range []Connector{prom, promTok} {
			got, err := s.GetConnector(ctx, "acc2", want.Name)
			if diff := cmp.Diff(want, got); err != nil || diff != "" {
				t.Errorf("GetConnector(%s) error %v (-want +got):\n%s", want.Name, err, diff)
			}
		}
		_, err = s.GetConnector(ctx, "acc1", "nope")
		wantErr(t, "GetConnector unknown", err, ErrNotFound)

		for _, inst := range []string{"i1", "i2"} {
			if err := s.SetConnectorSuccess(ctx, "acc1", "github", inst); err != nil {
				t.Fatal(err)
			}
		}
		got, err = s.GetConnector(ctx, "acc1", "github")
		wantGH := gh
		wantGH.LastSuccessInstance = "i2"
		if diff := cmp.Diff(wantGH, got); err != nil || diff != "" {
			t.Errorf("after SetConnectorSuccess, error %v (-want +got):\n%s", err, diff)
		}
		if got, _ := s.GetConnector(ctx, "acc2", "github"); got.LastSuccessInstance != "" {
			t.Errorf("SetConnectorSuccess touched another account's connector: %+v", got)
		}

		if err := s.DeleteConnector(ctx, "acc1", "github"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "delete again", s.DeleteConnector(ctx, "acc1", "github"), ErrNotFound)
		wantErr(t, "delete unknown", s.DeleteConnector(ctx, "acc3", "cluster"), ErrNotFound)
		if err := s.SetConnectorSuccess(ctx, "acc1", "github", "i3"); err != nil {
			t.Errorf("SetConnectorSuccess of a deleted connector: %v", err)
		}
		list, err = s.ListConnectors(ctx, "acc1")
		if diff := cmp.Diff([]Connector{k8s}, list); err != nil || diff != "" {
			t.Errorf("ListConnectors after delete, error %v (-want +got):\n%s", err, diff)
		}
		if got, err := s.GetConnector(ctx, "acc2", "github"); err != nil || got.Name != "github" {
			t.Errorf("deleting acc1/github deleted acc2/github: %v", err)
		}
	})
}

// TestCompleteTaskRecordsConnectorSuccess: the result that ends a task of
// a connector succeeded makes its instance the connector's last success
// in the same call (the pipeline engine starts the stage's next step as
// soon as it sees the task end, and that step must find the preference);
// a failure changes nothing, a repeated result is a no-op, a deleted
// connector is no error, and another account's connector of the same
// name is left alone.
func TestCompleteTaskRecordsConnectorSuccess(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, acc := range []string{"acc1", "acc2"} {
			if err := s.CreateConnector(ctx, Connector{AccountID: acc, Name: "farm", URL: "https://farm.example", CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			task, instance, connector, status string
			want                              string // acc1's farm's last success after the step
		}{
			{"t1", "i1", "farm", protocol.StatusSucceeded, "i1"},
			{"t2", "i2", "farm", protocol.StatusFailed, "i1"},
			{"t3", "i2", "farm", protocol.StatusSucceeded, "i2"},
			{"t4", "i1", "", protocol.StatusSucceeded, "i2"},
			{"t5", "i1", "gone", protocol.StatusSucceeded, "i2"},
		}
		for _, st := range steps {
			task := newTask(st.task, "acc1", t0)
			task.Spec.Connector = st.connector
			mustCreate(t, s, task)
			mustClaim(t, s, st.task, st.instance, t0)
			for range 2 { // a repeated result changes nothing
				if _, err := s.CompleteTask(ctx, st.task, 1, Result{Status: st.status}, at(time.Second)); err != nil {
					t.Fatalf("CompleteTask(%s): %v", st.task, err)
				}
			}
			got, err := s.GetConnector(ctx, "acc1", "farm")
			if err != nil || got.LastSuccessInstance != st.want {
				t.Errorf("after %s %s on %s (connector %q): last success %q, error %v; want %q",
					st.task, st.status, st.instance, st.connector, got.LastSuccessInstance, err, st.want)
			}
		}
		if got, _ := s.GetConnector(ctx, "acc2", "farm"); got.LastSuccessInstance != "" {
			t.Errorf("another account's connector farm: last success %q, want none", got.LastSuccessInstance)
		}
	})
}
