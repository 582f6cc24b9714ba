package webui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestRefusalTextSaysItInThePagesWords: an API refusal is said without
// the CLI's hints (flags, legate commands), naming what was refused and
// where permissions are granted.
func TestRefusalTextSaysItInThePagesWords(t *testing.T) {
	for _, tt := range []struct {
		err       *protocol.Error
		want, not string
	}{
		{&protocol.Error{Status: http.StatusForbidden, Message: "user vic lacks the permission pipeline:execute on pipeline greet at account; a role with pipeline:execute bound at account or above grants it (legate role bind ROLE --user vic ...)"},
			"You may not run pipeline greet: user vic lacks the permission pipeline:execute on pipeline greet at account; a role with pipeline:execute bound at account or above grants it (someone who manages users can bind you a role that has it under Settings → Role bindings).", "--user"},
		{&protocol.Error{Status: http.StatusBadRequest, Message: "pipeline greet needs the input who: give it with --input who=VALUE"},
			"Could not run pipeline greet: pipeline greet needs the input who", "--input"},
		{&protocol.Error{Status: http.StatusBadRequest, Message: `unknown project "p9" in org "o1" (legate project create --org o1 p9)`},
			`Could not run pipeline greet: unknown project "p9" in org "o1"`, "legate"},
	} {
		got := actionRefusal(tt.err, "run pipeline greet")
		if got != tt.want || strings.Contains(got, tt.not) {
			t.Errorf("actionRefusal(%q):\n got %q\nwant %q", tt.err.Message, got, tt.want)
		}
	}
}

// TestPipelineRunFieldsCheckRequiredInputs: a required input left empty
// is an error on its field; defaults fill the form and may be emptied.
func TestPipelineRunFieldsCheckRequiredInputs(t *testing.T) {
	def := "hello"
	p := protocol.Pipeline{Name: "greet", Inputs: []protocol.PipelineInput{{Name: "who", Description: "whom to greet"}, {Name: "greeting", Default: &def}}}
	fresh := pipelineRunFields(p, nil)
	if fresh[0].Value != "" || fresh[0].Error != "" || fresh[1].Value != "hello" || !strings.Contains(fresh[0].Hint, "required") {
		t.Errorf("a fresh form: %+v", fresh)
	}
	sent := pipelineRunFields(p, url.Values{"input.who": {"  "}, "input.greeting": {""}})
	if !strings.HasPrefix(sent[0].Error, "Fill in who") || sent[1].Error != "" || !fieldErrors(sent) {
		t.Errorf("a form sent without who: %+v", sent)
	}
	if fs := pipelineRunFields(p, url.Values{"input.who": {"ana"}}); fieldErrors(fs) {
		t.Errorf("a form sent with who: %+v", fs)
	}
}
