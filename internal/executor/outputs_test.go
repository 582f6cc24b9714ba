package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestParseOutputs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		want     map[string]string
		problems []string
	}{
		{"none", "", nil, nil},
		{"lines", "a=1\n\nB_2=x=y\r\nempty=\n", map[string]string{"a": "1", "B_2": "x=y", "empty": ""}, nil},
		{"last wins", "a=1\na=2", map[string]string{"a": "2"}, nil},
		{"bad lines", "no equals\n1a=x\nok=1\nsp ace=2\n", map[string]string{"ok": "1"}, []string{
			"line 1 of LEGATE_OUTPUT has no '=': write KEY=VALUE",
			`line 2 of LEGATE_OUTPUT: "1a" is no valid key (letters, digits and '_', not starting with a digit)`,
			`line 4 of LEGATE_OUTPUT: "sp ace" is no valid key (letters, digits and '_', not starting with a digit)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := ParseOutputs([]byte(tc.in))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	var many strings.Builder
	for i := range protocol.MaxOutputs + 2 {
		fmt.Fprintf(&many, "k%d=v\n", i)
	}
	got, problems := ParseOutputs([]byte(many.String()))
	if len(got) != protocol.MaxOutputs || len(problems) != 1 {
		t.Errorf("%d outputs: kept %d, problems %q", protocol.MaxOutputs+2, len(got), problems)
	}
	got, problems = ParseOutputs([]byte("a=" + strings.Repeat("x", protocol.MaxOutputBytes)))
	if len(got["a"]) != protocol.MaxOutputBytes-2 || len(problems) != 1 {
		t.Errorf("an output file over the limit: value of %d bytes, problems %q", len(got["a"]), problems)
	}
}

func FuzzParseOutputs(f *testing.F) {
	f.Add("a=1\nb=2\r\n\nbad\n")
	f.Add("=x\n1=2\nk==\n")
	f.Fuzz(func(t *testing.T, s string) {
		out, _ := ParseOutputs([]byte(s))
		if len(out) > protocol.MaxOutputs {
			t.Fatalf("%d outputs", len(out))
		}
		total := 0
		for k, v := range out {
			if !validOutputKey(k) || strings.ContainsAny(v, "\n") {
				t.Fatalf("output %q=%q", k, v)
			}
			total += len(k) + len(v)
		}
		if total > protocol.MaxOutputBytes {
			t.Fatalf("%d bytes of outputs", total)
		}
	})
}

// TestShellOutputs: a script writes to $LEGATE_OUTPUT and the outcome
// carries the lines; a bad line is reported in the output, not fatal; a
// task's env cannot redirect the file.
func TestShellOutputs(t *testing.T) {
	t.Parallel()
	spec := shellSpec(`echo "artifact=web-1.tgz" >> "$LEGATE_OUTPUT"; echo "oops" >> "$LEGATE_OUTPUT"; echo done`)
	spec.Env = map[string]string{protocol.OutputEnv: "/tmp/elsewhere"}
	var out buffer
	o := Run(context.Background(), spec, Options{WorkDir: t.TempDir()}, &out)
	want := Outcome{Status: protocol.StatusSucceeded, ExitCode: intp(0), Outputs: map[string]string{"artifact": "web-1.tgz"}}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if got, wantOut := out.String(), "done\n\n[legate: line 2 of LEGATE_OUTPUT has no '=': write KEY=VALUE]\n"; got != wantOut {
		t.Errorf("output %q, want %q", got, wantOut)
	}
}
