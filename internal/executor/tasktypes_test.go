package executor

import (
	"errors"
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
	want := []string{protocol.TaskContainer, protocol.TaskHTTP, protocol.TaskKubernetes, protocol.TaskShell, protocol.TaskVerify}
	if got := TaskTypes(Options{}); !slices.Equal(got, want) {
		t.Errorf("TaskTypes = %v, want %v", got, want)
	}
	got := availableTypes(map[string]Type{"shell": shellType{}, "helm": unavailableType{}}, Options{})
	if !slices.Equal(got, []string{"shell"}) {
		t.Errorf("with a type that is not available: %v, want [shell]", got)
	}
}
