package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfigurations(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		tools, err := s.CreateConfiguration(ctx, Configuration{AccountID: "acc1", Name: "tools", Script: "apt-get install -y jq\n",
			Selectors: []string{"linux"}, CreatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		want := Configuration{AccountID: "acc1", Name: "tools", Script: "apt-get install -y jq\n", Selectors: []string{"linux"},
			Version: 1, CreatedAt: t0, UpdatedAt: t0}
		if diff := cmp.Diff(want, tools); diff != "" {
			t.Errorf("CreateConfiguration (-want +got):\n%s", diff)
		}
		base, err := s.CreateConfiguration(ctx, Configuration{AccountID: "acc1", Name: "base", Script: "true", CreatedAt: at(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateConfiguration(ctx, Configuration{AccountID: "acc2", Name: "tools", Script: "x", CreatedAt: t0}); err != nil {
			t.Fatalf("same name in another account: %v", err)
		}
		_, err = s.CreateConfiguration(ctx, Configuration{AccountID: "acc1", Name: "tools", Script: "y", CreatedAt: t0})
		wantErr(t, "duplicate configuration", err, ErrConflict)

		list, err := s.ListConfigurations(ctx, "acc1")
		if diff := cmp.Diff([]Configuration{base, tools}, list); err != nil || diff != "" {
			t.Errorf("ListConfigurations error %v (-want +got):\n%s", err, diff)
		}

		script := "apt-get install -y jq curl\n"
		got, err := s.UpdateConfiguration(ctx, "acc1", "tools", ConfigurationUpdate{Script: &script}, at(time.Hour))
		want.Script, want.Version, want.UpdatedAt = script, 2, at(time.Hour)
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("UpdateConfiguration(script) error %v (-want +got):\n%s", err, diff)
		}
		sel := []string{"gpu", "linux"}
		got, err = s.UpdateConfiguration(ctx, "acc1", "tools", ConfigurationUpdate{Selectors: &sel}, at(2*time.Hour))
		want.Selectors, want.Version, want.UpdatedAt = sel, 3, at(2*time.Hour)
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("UpdateConfiguration(selectors) error %v (-want +got):\n%s", err, diff)
		}
		stored, err := s.GetConfiguration(ctx, "acc1", "tools")
		if diff := cmp.Diff(want, stored); err != nil || diff != "" {
			t.Errorf("GetConfiguration error %v (-want +got):\n%s", err, diff)
		}
		_, err = s.UpdateConfiguration(ctx, "acc1", "nope", ConfigurationUpdate{Script: &script}, t0)
		wantErr(t, "update unknown", err, ErrNotFound)
		_, err = s.GetConfiguration(ctx, "acc1", "nope")
		wantErr(t, "get unknown", err, ErrNotFound)

		wantErr(t, "delete unknown", s.DeleteConfiguration(ctx, "acc1", "nope"), ErrNotFound)
		if err := s.DeleteConfiguration(ctx, "acc1", "base"); err != nil {
			t.Fatal(err)
		}
		list, err = s.ListConfigurations(ctx, "acc1")
		if diff := cmp.Diff([]Configuration{want}, list); err != nil || diff != "" {
			t.Errorf("after delete, error %v (-want +got):\n%s", err, diff)
		}
	})
}

func TestConfigurationResults(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, in := range []Instance{
			{ID: "i1", AccountID: "acc1", IdentityKey: "a|h1", Name: "a", Hostname: "h1", RegisteredAt: t0, Description: "build box"},
			{ID: "i2", AccountID: "acc1", IdentityKey: "a|h2", Name: "a", Hostname: "h2", RegisteredAt: t0},
			{ID: "i3", AccountID: "acc2", IdentityKey: "a|h1", Name: "a", Hostname: "h1", RegisteredAt: t0},
		} {
			if _, err := s.UpsertInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		if in, err := s.GetInstance(ctx, "i1"); err != nil || in.Description != "build box" {
			t.Errorf("description not stored: %+v, %v", in, err)
		}
		zero, three := 0, 3
		r1 := ConfigurationResult{InstanceID: "i1", Configuration: "tools", Version: 2, ExitCode: &zero,
			Output: "ok\n", OutputBytes: 3, StartedAt: t0, FinishedAt: at(time.Second)}
		r3 := ConfigurationResult{InstanceID: "i3", Configuration: "x", Version: 1, ExitCode: &three,
			Error: "exit status 3", Output: "bad", OutputBytes: 3, StartedAt: t0, FinishedAt: at(time.Second)}
		for _, r := range []ConfigurationResult{r1, r3} {
			if err := s.RecordConfigurationResult(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ConfigurationResults(ctx, "acc1")
		if diff := cmp.Diff(map[string]ConfigurationResult{"i1": r1}, got); err != nil || diff != "" {
			t.Errorf("ConfigurationResults error %v (-want +got):\n%s", err, diff)
		}
		// A newer run replaces it; a late report of an older run does not.
		newer := r1
		newer.Version, newer.ExitCode, newer.Error, newer.FinishedAt = 3, nil, "timed out after 10m0s", at(time.Hour)
		older := r1
		older.Version, older.FinishedAt = 1, at(time.Minute)
		for _, r := range []ConfigurationResult{newer, older} {
			if err := s.RecordConfigurationResult(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err = s.ConfigurationResults(ctx, "acc1")
		if diff := cmp.Diff(map[string]ConfigurationResult{"i1": newer}, got); err != nil || diff != "" {
			t.Errorf("after newer and older reports, error %v (-want +got):\n%s", err, diff)
		}
	})
}
