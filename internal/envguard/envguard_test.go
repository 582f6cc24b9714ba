package envguard

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	for _, values := range []map[string]string{
		{},
		{"DELEGATE_TOKEN": "tok"},
		{"DELEGATE_TOKEN": "tok", "PROXY_PASSWORD": "p@ss w=rd\nline", "--token": "flag-tok", "EMPTY": ""},
		{"HTTPS_PROXY": "http://bob:pw@proxy:3128", "X": strings.Repeat("v", 100000)},
	} {
		b, err := Encode(values)
		if err != nil {
			t.Fatalf("Encode(%q): %v", values, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%q)): %v", values, err)
		}
		if d := cmp.Diff(values, map[string]string(got)); d != "" {
			t.Errorf("round trip (-want +got):\n%s", d)
		}
	}
	b, _ := Encode(map[string]string{"B": "2", "A": "1"})
	if want := "LGCRED01\x00\x00\x00\x08A\x001\x00B\x002\x00"; string(b) != want {
		t.Errorf("Encode = %q, want %q", b, want)
	}
}

func TestEncodeRefuses(t *testing.T) {
	t.Parallel()
	for _, values := range []map[string]string{
		{"": "v"},
		{"A=B": "v"},
		{"A\x00": "v"},
		{"A": "v\x00"},
		{"A": strings.Repeat("v", MaxSize)},
	} {
		if _, err := Encode(values); err == nil {
			t.Errorf("Encode(%.40q) succeeded", values)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	frame := func(body string) string {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(body)))
		return magic + string(n[:]) + body
	}
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "no LGCRED01 header"},
		{"other magic", "LGCRED02\x00\x00\x00\x00", "no LGCRED01 header"},
		{"short header", "LGCRED01\x00", "no LGCRED01 header"},
		{"too large", "LGCRED01\xff\xff\xff\xff", "more than"},
		{"short body", frame("A\x001\x00")[:len(frame("A\x001\x00"))-1], "announced"},
		{"long body", frame("A\x001\x00") + "x", "announced"},
		{"no final NUL", frame("A\x001"), "does not end with NUL"},
		{"name without value", frame("A\x00"), "a name without a value"},
		{"three fields", frame("A\x001\x00B\x00"), "a name without a value"},
		{"empty name", frame("\x001\x00"), "bad name"},
		{"= in name", frame("A=B\x001\x00"), "bad name"},
		{"repeated", frame("A\x001\x00A\x002\x00"), "out of order or repeated"},
		{"out of order", frame("B\x001\x00A\x002\x00"), "out of order or repeated"},
	} {
		_, err := Decode([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Decode(%q) = %v, want an error with %q", tt.name, tt.in, err, tt.want)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecode(f *testing.F) {
	for _, values := range []map[string]string{
		{}, {"A": "1"}, {"DELEGATE_TOKEN": "tok", "--token": "x", "E": ""},
	} {
		b, _ := Encode(values)
		f.Add(b)
	}
	f.Add([]byte("LGCRED01\x00\x00\x00\x04A\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		values, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(values)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", b, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("Encode(Decode(%q)) = %q", b, again)
		}
	})
}

func TestStripFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		args  []string
		want  []string
		found map[string]string
	}{
		{"none", []string{"legate", "delegate", "--grace", "5s"}, []string{"legate", "delegate", "--grace", "5s"}, map[string]string{}},
		{"separate value", []string{"legate", "delegate", "--token", "tok", "--grace", "5s"}, []string{"legate", "delegate", "--grace", "5s"},
			map[string]string{"token": "tok"}},
		{"= value", []string{"legate", "delegate", "--token=tok=x"}, []string{"legate", "delegate"}, map[string]string{"token": "tok=x"}},
		{"last wins", []string{"legate", "--token", "a", "delegate", "--token=b"}, []string{"legate", "delegate"}, map[string]string{"token": "b"}},
		{"flag at the end", []string{"legate", "delegate", "--token"}, []string{"legate", "delegate"}, map[string]string{}},
		{"after --", []string{"legate", "--token", "a", "--", "--token", "b"}, []string{"legate", "--", "--token", "b"}, map[string]string{"token": "a"}},
		{"similar names", []string{"legate", "--tokens", "x", "--token-file=y", "-token", "z"}, []string{"legate", "--tokens", "x", "--token-file=y", "-token", "z"},
			map[string]string{}},
		{"no program", nil, nil, map[string]string{}},
	} {
		got, found := stripFlags(tt.args, []string{"token"})
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s: args (-want +got):\n%s", tt.name, d)
		}
		if d := cmp.Diff(tt.found, found); d != "" {
			t.Errorf("%s: found (-want +got):\n%s", tt.name, d)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	r := Request{
		Env: []string{"PATH=/bin", "DELEGATE_TOKEN=tok", "HTTPS_PROXY=http://u:p@proxy:1", "DELEGATE_TOKEN=second", "NOEQUALS",
			"HTTP_PROXY=http://proxy:2"},
		Secret: func(name, value string) bool {
			return name == "DELEGATE_TOKEN" || strings.HasSuffix(name, "_PROXY") && strings.Contains(value, "@")
		},
		Args:        []string{"legate", "delegate", "--token", "flag-tok"},
		SecretFlags: []string{"token"},
	}
	env, args, values := r.split()
	if d := cmp.Diff([]string{"PATH=/bin", "NOEQUALS", "HTTP_PROXY=http://proxy:2"}, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"legate", "delegate"}, args); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	want := map[string]string{"DELEGATE_TOKEN": "tok", "HTTPS_PROXY": "http://u:p@proxy:1", "--token": "flag-tok"}
	if d := cmp.Diff(want, values); d != "" {
		t.Errorf("values (-want +got):\n%s", d)
	}
}

func TestValues(t *testing.T) {
	t.Setenv("ENVGUARD_TEST_PLAIN", "plain")
	v := Values{"ENVGUARD_TEST_SECRET": "s", "--token": "tok"}
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"ENVGUARD_TEST_SECRET", "s", true},
		{"ENVGUARD_TEST_PLAIN", "plain", true},
		{"--token", "", false},
		{"ENVGUARD_TEST_NONE", "", false},
	} {
		if got, ok := v.LookupEnv(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("LookupEnv(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if tok, ok := v.Flag("token"); tok != "tok" || !ok {
		t.Errorf("Flag(token) = %q, %v", tok, ok)
	}
	env := v.Environ()
	if !strings.Contains(strings.Join(env, "\n"), "\nENVGUARD_TEST_SECRET=s") || strings.Contains(strings.Join(env, "\n"), "tok") {
		t.Errorf("Environ() = %q; want the process environment plus ENVGUARD_TEST_SECRET=s, without the flag", env)
	}
}
