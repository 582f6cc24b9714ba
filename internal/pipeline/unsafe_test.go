package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUnsafeExpressions: an expression in text that runs as code, or in
// the scheme and host of a URL, is refused with the safe form in the
// message unless the step says unsafeExpressions: true; everywhere else it
// is fine.
func TestUnsafeExpressions(t *testing.T) {
	head := "name: p\ninputs: {version: '1', api-host: h}\nstages:\n  - name: s\n    steps:\n      - name: a\n        outputs: [art]\n        shell: x\n      - name: b\n"
	for _, tt := range []struct {
		name, step string
		want       string // "" = accepted
	}{
		{"shell", "        shell: ./ship ${{ inputs.version }}\n",
			`line 9: stages[0].steps[1].shell: ${{ inputs.version }} in a script runs its value as code (a webhook payload's field, a step's output): pass it as an environment variable — env: {VERSION: "${{ inputs.version }}"} — and write "$VERSION" in the script, or, if every value it can take is trusted, mark the step unsafeExpressions: true`},
		{"shell output", "        shell: ./ship ${{ stages.s.steps.a.outputs.art }}\n", `env: {ART: "${{ stages.s.steps.a.outputs.art }}"}`},
		{"dashed input", "        shell: ./ship ${{ inputs.api-host }}\n", `env: {API_HOST: "${{ inputs.api-host }}"} — and write "$API_HOST"`},
		{"container script", "        container: {image: i, script: 'echo ${{ inputs.version }}'}\n", `stages[0].steps[1].container.script: ${{ inputs.version }} in a script`},
		{"container command", "        container: {image: i, command: [git, clone, -b, '${{ inputs.version }}']}\n", `stages[0].steps[1].container.command[3]: ${{ inputs.version }} in a container's command`},
		{"url host", "        http: {url: 'https://${{ inputs.api-host }}/v1'}\n", `stages[0].steps[1].http.url: an expression in the scheme or host of a URL ("https://${{ inputs.api-host }}")`},
		{"whole url", "        http: {url: '${{ inputs.api-host }}'}\n", `scheme or host`},
		{"url path", "        http: {url: 'https://deploy.example/v/${{ inputs.version }}?x=${{ inputs.version }}'}\n", ""},
		{"http body and header", "        http: {url: 'https://x.example/', body: '${{ inputs.version }}', headers: {X-V: '${{ inputs.version }}'}}\n", ""},
		{"env", "        shell: ./ship \"$V\"\n        env: {V: '${{ inputs.version }}'}\n", ""},
		{"escape", "        shell: echo '$${{ inputs.version }}'\n", ""},
		{"opted in", "        unsafeExpressions: true\n        shell: ./ship ${{ inputs.version }}\n", ""},
		{"opted in, url", "        unsafeExpressions: true\n        http: {url: '${{ inputs.api-host }}'}\n", ""},
		{"opt-in not a boolean", "        unsafeExpressions: maybe\n        shell: x\n", "unsafeExpressions"},
		{"input completes a secret", "        shell: x\n        env: {V: '${{ inputs.version }}{secrets.S}'}\n", "could complete a reference to a stored secret"},
		{"output completes a secret", "        http: {url: 'https://x.example/${{ stages.s.steps.a.outputs.art }}{secrets.S}'}\n", "could complete a reference"},
		{"opted in, still no secret", "        unsafeExpressions: true\n        shell: echo ${{ inputs.version }}{secrets.S}\n", "could complete a reference"},
		{"secret named by input", "        shell: x\n        env: {V: '${secrets.${{ inputs.version }}}'}\n", "name cannot come from an expression"},
		{"secret beside an expression", "        shell: x\n        env: {V: '${{ inputs.version }}-${secrets.S}'}\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(head + tt.step))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestExpansionLimits: a value, and a step's fields in all, expand to at
// most MaxExpandedValue and MaxExpandedTask bytes; past either, StepSpec
// fails with an *ExpandError that names the limit.
func TestExpansionLimits(t *testing.T) {
	big := strings.Repeat("a", MaxInputValueLen)
	src := func(env string) *Pipeline {
		return mustParse(t, "name: p\ninputs: {x: {}}\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: env\n        env: {"+env+"}\n")
	}
	refs := func(n int) string { return strings.Repeat("${{ inputs.x }}", n) }
	var many []string
	for i := range 5 {
		many = append(many, fmt.Sprintf("V%d: '%s'", i, refs(MaxExpandedValue/MaxInputValueLen)))
	}
	for _, tt := range []struct {
		name, env string
		limit     int // 0 = fits
	}{
		{"a value at the limit", "V: '" + refs(MaxExpandedValue/MaxInputValueLen) + "'", 0},
		{"a value one reference over", "V: '" + refs(MaxExpandedValue/MaxInputValueLen+1) + "'", MaxExpandedValue},
		{"a value a thousand references over", "V: '" + refs(1000) + "'", MaxExpandedValue},
		{"values over the task's limit", strings.Join(many, ", "), MaxExpandedTask},
		{"values under the task's limit", strings.Join(many[:3], ", "), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := src(tt.env).StepSpec(StepRef{"s", "a"}, map[string]string{"x": big}, nil)
			var ee *ExpandError
			switch {
			case tt.limit == 0 && err != nil:
				t.Errorf("refused: %v", err)
			case tt.limit != 0 && (!errors.As(err, &ee) || ee.Limit != tt.limit || !strings.Contains(err.Error(), fmt.Sprintf("at most %d bytes", tt.limit))):
				t.Errorf("got %v, want an *ExpandError at %d", err, tt.limit)
			}
		})
	}
}
