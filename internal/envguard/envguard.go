// Package envguard keeps a process's credentials out of reach of the other
// processes of its user, such as the tasks a delegate runs.
//
// /proc/PID/environ and /proc/PID/cmdline show the environment and command
// line a process was executed with, to every process of the same user, for
// as long as it runs: os.Unsetenv does not change them. So Reexec executes
// the running binary again, in the same process (same PID), with the
// credentials removed from its environment and command line, and hands
// their values to the new image through an inherited pipe whose file
// descriptor number is in FDEnv (not a secret). The new image calls Receive
// first thing: it reads the values, closes the pipe and removes FDEnv.
// Harden then marks the process not dumpable, so that processes of the same
// user cannot read its memory either, and SealDescriptors keeps the file
// descriptors it inherited from reaching the programs it starts.
//
// The hand-over format (Encode, Decode) is "LGCRED01", the length of the
// body as 4 bytes big-endian, and the body: name NUL value NUL for each
// entry, names in increasing byte order, none repeated. Environment
// variables and command-line arguments cannot contain NUL, and names
// contain no '='.
package envguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// FDEnv names the environment variable that carries, to the re-executed
// image, the number of the file descriptor to read the credentials from.
const FDEnv = "LEGATE_CREDENTIALS_FD"

// MaxSize bounds the encoded hand-over (header included).
const MaxSize = 1 << 20

const magic = "LGCRED01"

const headerLen = len(magic) + 4

// Request says what Reexec takes out of the process.
type Request struct {
	// Env is the environment to start from ("K=V"); nil = os.Environ().
	Env []string
	// Secret reports whether the variable name=value is a credential;
	// every entry of Env it accepts is taken out. Nil takes out none.
	Secret func(name, value string) bool
	// Args is the command line, program name first; nil = os.Args.
	Args []string
	// SecretFlags names the long flags whose values are credentials (such
	// as "token" for --token VALUE and --token=VALUE): they are taken out
	// of Args and handed over under the name "--" + flag. Arguments after
	// "--" are left alone.
	SecretFlags []string
	// Executable is the program to execute; "" = /proc/self/exe, the
	// running binary, even if its file was replaced or removed since.
	// Another program is executed even when there is nothing to take out
	// (it must call Receive first thing, as this one does).
	Executable string
}

// split returns the environment and arguments without the credentials,
// and the credentials by name ("--flag" for flags). Of a variable set
// twice the first value counts, as for os.Getenv; of a flag given twice
// the last, as for the flag parser.
func (r Request) split() (env, args []string, values map[string]string) {
	values = map[string]string{}
	if r.Env == nil {
		r.Env = os.Environ()
	}
	if r.Args == nil {
		r.Args = os.Args
	}
	for _, kv := range r.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && r.Secret != nil && r.Secret(k, v) {
			if _, dup := values[k]; !dup {
				values[k] = v
			}
			continue
		}
		env = append(env, kv)
	}
	args, flags := stripFlags(r.Args, r.SecretFlags)
	for name, v := range flags {
		values["--"+name] = v
	}
	return env, args, values
}

// stripFlags removes the long flags names (--name VALUE, --name=VALUE)
// from args[1:] up to a "--" argument, and returns what is left and the
// last value of each flag found.
func stripFlags(args, names []string) ([]string, map[string]string) {
	found := map[string]string{}
	if len(args) == 0 {
		return args, found
	}
	out := []string{args[0]}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		matched := false
		for _, n := range names {
			switch {
			case a == "--"+n:
				matched = true
				if i+1 < len(args) {
					found[n] = args[i+1]
					i++
				}
			case strings.HasPrefix(a, "--"+n+"="):
				matched = true
				found[n] = a[len(n)+3:]
			}
			if matched {
				break
			}
		}
		if !matched {
			out = append(out, a)
		}
	}
	return out, found
}

// Encode encodes values for the hand-over. Names must be non-empty and
// contain neither '=' nor NUL; values must not contain NUL.
func Encode(values map[string]string) ([]byte, error) {
	names := make([]string, 0, len(values))
	size := headerLen
	for n, v := range values {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return nil, fmt.Errorf("credential name %q: empty or contains '=' or NUL", n)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("credential %s: the value contains NUL", n)
		}
		names = append(names, n)
		size += len(n) + len(v) + 2
	}
	if size > MaxSize {
		return nil, fmt.Errorf("credentials take %d bytes, more than %d", size, MaxSize)
	}
	sort.Strings(names)
	b := make([]byte, headerLen, size)
	copy(b, magic)
	binary.BigEndian.PutUint32(b[len(magic):], uint32(size-headerLen))
	for _, n := range names {
		b = append(b, n...)
		b = append(b, 0)
		b = append(b, values[n]...)
		b = append(b, 0)
	}
	return b, nil
}

// errFormat is the error of every malformed hand-over.
var errFormat = errors.New("malformed credentials hand-over")

// bodyLen checks a header and returns the length of the body it announces.
func bodyLen(h []byte) (int, error) {
	if len(h) < headerLen || string(h[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: no %s header", errFormat, magic)
	}
	n := binary.BigEndian.Uint32(h[len(magic):headerLen])
	if n > MaxSize-uint32(headerLen) {
		return 0, fmt.Errorf("%w: %d bytes announced, more than %d", errFormat, n, MaxSize-headerLen)
	}
	return int(n), nil
}

// Decode decodes what Encode produced; anything else is an error (it never
// panics). Encode(Decode(b)) is b.
func Decode(b []byte) (map[string]string, error) {
	n, err := bodyLen(b)
	if err != nil {
		return nil, err
	}
	body := b[headerLen:]
	if len(body) != n {
		return nil, fmt.Errorf("%w: %d bytes announced, %d present", errFormat, n, len(body))
	}
	values := map[string]string{}
	if n == 0 {
		return values, nil
	}
	if body[len(body)-1] != 0 {
		return nil, fmt.Errorf("%w: does not end with NUL", errFormat)
	}
	fields := bytes.Split(body[:len(body)-1], []byte{0})
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("%w: a name without a value", errFormat)
	}
	prev := ""
	for i := 0; i < len(fields); i += 2 {
		name := string(fields[i])
		if name == "" || strings.IndexByte(name, '=') >= 0 {
			return nil, fmt.Errorf("%w: bad name %q", errFormat, name)
		}
		if i > 0 && name <= prev {
			return nil, fmt.Errorf("%w: names out of order or repeated at %q", errFormat, name)
		}
		prev = name
		values[name] = string(fields[i+1])
	}
	return values, nil
}

// Values are credentials received from Receive, by name: environment
// variables by their names, flags as "--" + the flag's name.
type Values map[string]string

// LookupEnv looks name up among the received values, then in the process
// environment: a drop-in for os.LookupEnv for settings that may be
// credentials. Flags ("--token") are not environment variables and are
// not found.
func (v Values) LookupEnv(name string) (string, bool) {
	if !strings.HasPrefix(name, "--") {
		if s, ok := v[name]; ok {
			return s, true
		}
	}
	return os.LookupEnv(name)
}

// Flag returns the value handed over for the long flag name, if any.
func (v Values) Flag(name string) (string, bool) {
	s, ok := v["--"+name]
	return s, ok
}

// Environ returns the process environment with the received environment
// variables added back: the environment the process was first started
// with (minus FDEnv), for callers that derive a child's environment from
// it and decide themselves what to leave out.
func (v Values) Environ() []string {
	env := os.Environ()
	names := make([]string, 0, len(v))
	for n := range v {
		if !strings.HasPrefix(n, "--") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		env = append(env, n+"="+v[n])
	}
	return env
}
