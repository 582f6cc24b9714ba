package delegate

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// withSecrets rewrites each reference to the environment variable that
// carries its value (the script file holds no value), keeps the escape
// $${secrets. as the literal text, and refuses a name it has no value for
// with the caller's error.
func TestWithSecretsRewritesReferencesToTheEnvironment(t *testing.T) {
	const value = "s3cr3t value"
	sc, err := withSecrets(`login -p "${secrets.REG_PW}"; echo $${secrets.NOT_ONE}; echo ${secrets.REG_PW}`,
		map[string]string{"REG_PW": value, "UNUSED": "x"}, func(string) error { return errors.New("unexpected") })
	if err != nil {
		t.Fatal(err)
	}
	if want := `login -p "${LEGATE_SECRET_REG_PW}"; echo ${secrets.NOT_ONE}; echo ${LEGATE_SECRET_REG_PW}`; sc.script != want {
		t.Errorf("script %q, want %q", sc.script, want)
	}
	if strings.Contains(sc.script, value) {
		t.Error("the script holds the value")
	}
	if !slices.Equal(sc.env, []string{"LEGATE_SECRET_REG_PW=" + value}) || !slices.Equal(sc.mask, []string{value}) {
		t.Errorf("env %q, mask %q", sc.env, sc.mask)
	}

	missing := errors.New("no NOPE")
	if _, err := withSecrets("echo ${secrets.NOPE}", nil, func(n string) error {
		if n != "NOPE" {
			t.Errorf("missing called with %q", n)
		}
		return missing
	}); !errors.Is(err, missing) {
		t.Errorf("a name without a value: %v", err)
	}
	if _, err := withSecrets("echo ${secrets.bad-name}", nil, nil); err == nil || !strings.Contains(err.Error(), "malformed secret reference") {
		t.Errorf("a malformed reference: %v", err)
	}
	if sc, err := withSecrets("echo $HOME", nil, nil); err != nil || sc.script != "echo $HOME" || sc.env != nil {
		t.Errorf("a script without references: %+v, %v", sc, err)
	}
	if sc, err := withSecrets("echo '$${secrets.X}'", nil, nil); err != nil || sc.script != "echo '${secrets.X}'" || sc.env != nil {
		t.Errorf("only an escape: %+v, %v", sc, err)
	}
}
