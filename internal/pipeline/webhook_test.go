package pipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const webhookSrc = `name: hooked
inputs:
  version: "0.0"
  ref: {}
  draft: "no"
  region: eu
triggers:
  webhook:
    inputs:
      version: release.tag_name
      draft: release.draft
      ref: commits.1.id
stages:
  - name: s
    steps:
      - {name: a, shell: 'echo "$V"', env: {V: '${{ inputs.version }}'}}
`

func TestParseTriggers(t *testing.T) {
	p := mustParse(t, webhookSrc)
	want := map[string]string{"version": "release.tag_name", "draft": "release.draft", "ref": "commits.1.id"}
	if diff := cmp.Diff(want, p.Triggers.Webhook.Inputs); diff != "" {
		t.Errorf("webhook inputs (-want +got):\n%s", diff)
	}
}

func TestParseTriggersRefused(t *testing.T) {
	base := "name: p\ninputs: {v: '1'}\nstages: [{name: s, steps: [{name: a, shell: x}]}]\n"
	tests := []struct {
		name, triggers, want string
	}{
		{"undeclared input", "triggers:\n  webhook:\n    inputs: {nope: a.b}\n", `line 6: triggers.webhook.inputs.nope: no input named "nope"`},
		{"bad path", "triggers:\n  webhook:\n    inputs: {v: 'a..b'}\n", `line 6: triggers.webhook.inputs.v: payload path "a..b" is invalid`},
		{"path with space", "triggers:\n  webhook:\n    inputs: {v: 'a b'}\n", `payload path "a b" is invalid`},
		{"not a text", "triggers:\n  webhook:\n    inputs: {v: [a]}\n", `line 6: triggers.webhook.inputs.v: expected a text value`},
		{"unknown trigger", "triggers:\n  cron: {}\n", `line 5: triggers.cron: unknown field; known fields here: webhook`},
		{"unknown webhook field", "triggers:\n  webhook: {secret: x}\n", `line 5: triggers.webhook.secret: unknown field; known fields here: inputs`},
		{"triggers not a mapping", "triggers: webhook\n", `line 4: triggers: expected a mapping`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(base + tt.triggers))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWebhookInputs(t *testing.T) {
	p := mustParse(t, webhookSrc)
	tests := []struct {
		name    string
		payload string
		want    map[string]string
		wantErr string
	}{
		{"mapped paths", `{"release": {"tag_name": "v1.2.3", "draft": false}, "commits": [{"id": "a"}, {"id": "b"}]}`,
			map[string]string{"version": "v1.2.3", "draft": "false", "ref": "b"}, ""},
		{"top-level of the same name", `{"region": "us", "version": "ignored: mapped elsewhere"}`, map[string]string{"region": "us"}, ""},
		{"numbers as written", `{"release": {"tag_name": 1.10}, "region": 12e3}`, map[string]string{"version": "1.10", "region": "12e3"}, ""},
		{"null and absent leave defaults", `{"release": {"tag_name": null}, "commits": [{"id": "a"}]}`, map[string]string{}, ""},
		{"path through a text", `{"release": "v1"}`, map[string]string{}, ""},
		{"object at a path", `{"release": {"tag_name": {"x": 1}}}`, nil, "input version: the payload's release.tag_name is an object"},
		{"object at top level", `{"region": ["eu"]}`, nil, "map the input to a field inside it"},
		{"not JSON", `payload=%7B%7D`, nil, "the body is not JSON"},
		{"empty", ``, nil, "the body is not JSON"},
		{"a list", `[1]`, nil, "the body is JSON a list, not an object"},
		{"two values", `{} {}`, nil, "goes on after its JSON value"},
		{"trailing garbage", `{}A0`, nil, "goes on after its JSON value"},
		{"trailing form feed", "{}\f", nil, "goes on after its JSON value"},
		{"trailing no-break space", "{}\u00a0", nil, "goes on after its JSON value"},
		{"trailing JSON whitespace", "{} \t\r\n", map[string]string{}, ""},
		{"too deep", strings.Repeat("[", MaxPayloadDepth+1), nil, "nests more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.WebhookInputs([]byte(tt.payload))
			if tt.wantErr != "" {
				var pe *PayloadError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("WebhookInputs: %v, want a *PayloadError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("inputs (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzWebhookInputs: any payload gives inputs or a *PayloadError, never a
// panic; the inputs are declared ones whose values are what the payload
// holds at their paths, and a payload that is a JSON object of texts
// always works.
func FuzzWebhookInputs(f *testing.F) {
	p, err := Parse([]byte(webhookSrc))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"release":{"tag_name":"v1"}}`, `{"commits":[{"id":"a"},{"id":2}]}`, `[`, `"x"`, `{"region":true}`, `{"a":"\"{["}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, err := p.WebhookInputs(payload)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v: want a *PayloadError", err, err)
			}
			return
		}
		if !json.Valid(payload) {
			t.Fatalf("accepted a payload that is not JSON: %q", payload)
		}
		for k := range got {
			if _, ok := p.Triggers.Webhook.Inputs[k]; !ok && k != "region" {
				t.Fatalf("input %q is not one the pipeline declares", k)
			}
		}
		if _, err := p.ResolveInputs(got); err != nil && !strings.Contains(err.Error(), "needs the input ref") && !strings.Contains(err.Error(), "bytes: at most") {
			t.Fatalf("ResolveInputs: %v", err)
		}
	})
}
