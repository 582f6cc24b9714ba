package executor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// unavailableType is a task type whose program this delegate lacks.
type unavailableType struct{ shellType }

func (unavailableType) available(Options) error { return errors.New("no such program") }

// TestTaskTypesAreWhatTheDelegateRuns: a delegate registers every type of
// its table, kubernetes included, sorted; a type whose available method
// fails is left out.
func TestTaskTypesAreWhatTheDelegateRuns(t *testing.T) {
	// Options.Helm decides, whatever helm this machine has on its PATH.
	noHelm := Options{Helm: filepath.Join(t.TempDir(), "no-helm")}
	want := []string{protocol.TaskContainer, protocol.TaskHTTP, protocol.TaskKubernetes, protocol.TaskShell, protocol.TaskVerify}
	if got := TaskTypes(noHelm); !slices.Equal(got, want) {
		t.Errorf("TaskTypes without helm = %v, want %v", got, want)
	}
	helm := filepath.Join(t.TempDir(), "helm")
	if err := os.WriteFile(helm, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	want = []string{protocol.TaskContainer, protocol.TaskHelm, protocol.TaskHTTP, protocol.TaskKubernetes, protocol.TaskShell, protocol.TaskVerify}
	if got := TaskTypes(Options{Helm: helm}); !slices.Equal(got, want) {
		t.Errorf("TaskTypes with helm = %v, want %v", got, want)
	}
	got := availableTypes(map[string]Type{"shell": shellType{}, "helm": unavailableType{}}, Options{})
	if !slices.Equal(got, []string{"shell"}) {
		t.Errorf("with a type that is not available: %v, want [shell]", got)
	}
}
