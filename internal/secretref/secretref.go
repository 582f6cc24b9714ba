// Package secretref reads references to stored secrets, ${secrets.NAME},
// in the text of a task (its script, a container's script and command,
// environment values, HTTP URL, headers and body), with one small scanner
// that both finds the names a text uses and replaces them with values. It
// knows nothing of where values come from: the manager looks them up and
// hands them in.
//
// The syntax: ${secrets.NAME}, NAME of 1 to MaxNameLen ASCII letters,
// digits and underscores, case-sensitive. Any other text that starts with
// "${secrets." is an error (so a typo never reaches a delegate as literal
// text). "$${secrets." is the escape: it stands for the literal text
// "${secrets." and is no reference ($${secrets.X} gives ${secrets.X}). A
// "$$" before anything else is left as it is (a shell's $$ keeps working).
package secretref

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// MaxNameLen bounds a secret's name.
const MaxNameLen = 128

const (
	open   = "${secrets."
	escape = "$${secrets."
)

// ValidName reports why name is not a valid secret name (nil if it is).
func ValidName(name string) error {
	if name == "" {
		return errors.New("a secret needs a name (letters, digits and underscores)")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("secret name of %d characters is too long: at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("secret name %s is invalid: use only letters, digits and underscores (A-Z, a-z, 0-9, _), as in ${secrets.DB_PASSWORD}", strconv.Quote(name))
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
}

// Has reports whether s may hold a reference or an escape: the cheap test
// before a scan.
func Has(s string) bool { return strings.Contains(s, open) }

// scan walks s: lit receives the literal pieces (escapes undone), ref the
// name of each reference, in order. It fails on a malformed reference.
func scan(s string, lit func(string), ref func(string)) error {
	for {
		i := strings.Index(s, open)
		if i < 0 {
			lit(s)
			return nil
		}
		if i > 0 && s[i-1] == '$' {
			// The escape: "$${secrets." is the literal "${secrets.".
			lit(s[:i-1])
			lit(open)
			s = s[i+len(open):]
			continue
		}
		lit(s[:i])
		rest := s[i+len(open):]
		n := 0
		for n < len(rest) && n <= MaxNameLen && nameByte(rest[n]) {
			n++
		}
		if n == 0 || n > MaxNameLen || n == len(rest) || rest[n] != '}' {
			return malformed(s[i:])
		}
		ref(rest[:n])
		s = rest[n+1:]
	}
}

func malformed(at string) error {
	const show = 40
	excerpt := at
	if len(excerpt) > show {
		excerpt = excerpt[:show] + "…"
	}
	return fmt.Errorf("malformed secret reference %s: write ${secrets.NAME}, NAME of 1 to %d letters, digits and underscores (and $${secrets. for the literal text ${secrets.)",
		strconv.QuoteToASCII(excerpt), MaxNameLen)
}

// Names returns the distinct names s references, in order of first use.
func Names(s string) ([]string, error) {
	if !Has(s) {
		return nil, nil
	}
	var out []string
	err := scan(s, func(string) {}, func(n string) {
		for _, o := range out {
			if o == n {
				return
			}
		}
		out = append(out, n)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Expand replaces each reference in s with value(name) and undoes the
// escapes.
func Expand(s string, value func(name string) string) (string, error) {
	if !Has(s) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	err := scan(s, func(l string) { b.WriteString(l) }, func(n string) { b.WriteString(value(n)) })
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// field is one text of a task spec that may hold references, named as a
// user would find it.
type field struct {
	name string
	get  func() string
	set  func(string)
}

// fields returns the texts of spec that may hold references; set writes
// into spec (and its maps).
func fields(spec *protocol.TaskSpec) []field {
	var out []field
	if sh := spec.Shell; sh != nil {
		out = append(out, field{"script", func() string { return sh.Script }, func(v string) { sh.Script = v }})
	}
	if c := spec.Container; c != nil {
		out = append(out, field{"container.script", func() string { return c.Script }, func(v string) { c.Script = v }})
		for i := range c.Command {
			out = append(out, field{fmt.Sprintf("container.command[%d]", i), func() string { return c.Command[i] }, func(v string) { c.Command[i] = v }})
		}
	}
	addMap := func(what string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, field{what + " " + k, func() string { return m[k] }, func(v string) { m[k] = v }})
		}
	}
	addMap("env", spec.Env)
	addMap("secret_env", spec.SecretEnv)
	if h := spec.HTTP; h != nil {
		out = append(out,
			field{"http url", func() string { return h.URL }, func(v string) { h.URL = v }},
			field{"http body", func() string { return h.Body }, func(v string) { h.Body = v }})
		addMap("http header", h.Headers)
	}
	if k := spec.Kubernetes; k != nil && k.Cluster != nil {
		c := k.Cluster
		out = append(out, field{"kubernetes cluster token", func() string { return c.Token }, func(v string) { c.Token = v }})
	}
	if h := spec.Helm; h != nil && h.Cluster != nil {
		c := h.Cluster
		out = append(out, field{"helm cluster token", func() string { return c.Token }, func(v string) { c.Token = v }})
	}
	if v := spec.Verify; v != nil && v.Provider != nil {
		p := v.Provider
		out = append(out,
			field{"verify provider bearer_token", func() string { return p.BearerToken }, func(v string) { p.BearerToken = v }},
			field{"verify provider password", func() string { return p.Password }, func(v string) { p.Password = v }})
	}
	return out
}

// SpecNames returns the distinct secret names a task spec references,
// sorted; a malformed reference is an error naming the field it is in, and
// so is "${secrets." in any other part of the spec (Stray).
func SpecNames(spec protocol.TaskSpec) ([]string, error) {
	if err := Stray(spec); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range fields(&spec) {
		names, err := Names(f.get())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Stray refuses "${secrets." in a part of spec where references are not
// resolved (a container's image or volumes, a selector, the HTTP method,
// a map's keys, and whatever a task spec carries in the future): it would
// reach the delegate as literal text, unchecked. The spec is read whole,
// as its JSON, with the texts that are resolved left out.
func Stray(spec protocol.TaskSpec) error {
	c := cloneSpec(spec)
	for _, f := range fields(&c) {
		f.set("")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("read the task spec: %w", err)
	}
	i := strings.Index(string(b), open)
	if i < 0 {
		return nil
	}
	const around = 40
	from, to := max(0, i-around), min(len(b), i+len(open)+around)
	return fmt.Errorf("a stored secret cannot be referenced here: …%s… (references are resolved only in a shell or container script, a container command, env and secret_env values, an HTTP URL, header values and body, a kubernetes cluster's token, and a verify provider's bearer token and password)",
		string(b[from:to]))
}

// Uses reports whether a spec holds a reference or an escape: whether it
// needs ResolveSpec before a delegate runs it.
func Uses(spec protocol.TaskSpec) bool {
	for _, f := range fields(&spec) {
		if Has(f.get()) {
			return true
		}
	}
	return false
}

// ResolveSpec returns a copy of spec with every reference replaced by its
// value from values and the escapes undone, and the distinct values it
// used, sorted (what the delegate masks). A name values lacks is an error
// naming it; spec itself is never changed.
func ResolveSpec(spec protocol.TaskSpec, values map[string]string) (protocol.TaskSpec, []string, error) {
	out := cloneSpec(spec)
	var mask []string
	for _, f := range fields(&out) {
		var missing string
		s, err := Expand(f.get(), func(n string) string {
			v, ok := values[n]
			if !ok && missing == "" {
				missing = n
			}
			if ok && v != "" && !slices.Contains(mask, v) {
				mask = append(mask, v)
			}
			return v
		})
		if err != nil {
			return protocol.TaskSpec{}, nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if missing != "" {
			return protocol.TaskSpec{}, nil, fmt.Errorf("%s: no value for secret %s", f.name, missing)
		}
		f.set(s)
	}
	slices.Sort(mask)
	return out, mask, nil
}

// cloneSpec copies the parts of a spec that ResolveSpec changes.
func cloneSpec(s protocol.TaskSpec) protocol.TaskSpec {
	if s.Shell != nil {
		sh := *s.Shell
		s.Shell = &sh
	}
	if s.Container != nil {
		c := *s.Container
		c.Command = slices.Clone(c.Command)
		s.Container = &c
	}
	if s.HTTP != nil {
		h := *s.HTTP
		h.Headers = maps.Clone(h.Headers)
		s.HTTP = &h
	}
	if s.Kubernetes != nil {
		k := *s.Kubernetes
		if k.Cluster != nil {
			c := *k.Cluster
			k.Cluster = &c
		}
		s.Kubernetes = &k
	}
	if s.Helm != nil {
		h := *s.Helm
		if h.Cluster != nil {
			c := *h.Cluster
			h.Cluster = &c
		}
		s.Helm = &h
	}
	if s.Verify != nil {
		v := *s.Verify
		if v.Provider != nil {
			p := *v.Provider
			v.Provider = &p
		}
		s.Verify = &v
	}
	s.Env = maps.Clone(s.Env)
	s.SecretEnv = maps.Clone(s.SecretEnv)
	return s
}
