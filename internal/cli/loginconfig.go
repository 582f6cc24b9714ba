package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/legate-dev/legate/internal/atomicfile"
	"github.com/legate-dev/legate/internal/client"
)

// The config file legate login writes: the manager's URL and an API key,
// one "key=value" per line, '#' comments and blank lines allowed:
//
//	# written by legate login; remove with legate logout
//	url=https://legate.example.com
//	api_key=lgk_...
//
// It is read on every command that needs a URL or a key the flags and
// the environment do not give, so a damaged file must say where it is and
// how to fix it rather than be ignored (a command would then fail later
// with a message about a missing key that does not point at the file).

// loginConfig is what the config file holds.
type loginConfig struct {
	URL    string
	APIKey string
}

// maxLoginConfig bounds the file: it holds two short lines.
const maxLoginConfig = 64 << 10

// parseLoginConfig reads the config file's content. It accepts what
// formatLoginConfig writes, blank lines, '#' comments and keys it does not
// know (a newer legate may add some), and refuses anything else: a line
// without '=', a repeated key, control characters, a URL that is not one,
// or a file with a URL and no key (or a key and no URL).
func parseLoginConfig(b []byte) (loginConfig, error) {
	var c loginConfig
	if len(b) > maxLoginConfig {
		return c, fmt.Errorf("%d bytes, more than a login config ever holds (%d)", len(b), maxLoginConfig)
	}
	seen := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.IndexFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\uFFFD' }) >= 0 {
			return c, fmt.Errorf("line %d: control characters or bytes that are not UTF-8", n)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return c, fmt.Errorf("line %d: want key=value, found %q", n, trimQuote(line))
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if seen[k] {
			return c, fmt.Errorf("line %d: %s is given twice", n, k)
		}
		seen[k] = true
		switch k {
		case "url":
			base, err := client.ParseManagerURL(v)
			if err != nil {
				return c, fmt.Errorf("line %d: url: %v", n, err)
			}
			c.URL = base
		case "api_key":
			if v == "" || strings.ContainsAny(v, " \t") {
				return c, fmt.Errorf("line %d: api_key is empty or holds spaces", n)
			}
			c.APIKey = v
		}
	}
	if (c.URL == "") != (c.APIKey == "") {
		return c, errors.New("it holds a url without an api_key, or an api_key without a url")
	}
	return c, nil
}

func trimQuote(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// formatLoginConfig writes c as parseLoginConfig reads it.
func formatLoginConfig(c loginConfig) []byte {
	return []byte("# written by legate login; remove with legate logout\nurl=" + c.URL + "\napi_key=" + c.APIKey + "\n")
}

// configPath is $XDG_CONFIG_HOME/legate/config (~/.config/legate/config).
func (a *app) configPath() (string, error) {
	dir := a.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := a.getenv("HOME")
		if home == "" {
			return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "legate", "config"), nil
}

// storedLogin reads what legate login stored: a zero config when there is
// none, an error that names the file and the fix when it cannot be used.
func (a *app) storedLogin() (loginConfig, error) {
	p, err := a.configPath()
	if err != nil {
		return loginConfig{}, nil // nowhere to look: as if none
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return loginConfig{}, nil
	}
	if err != nil {
		return loginConfig{}, fmt.Errorf("the config of legate login: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLoginConfig+1))
	if err != nil {
		return loginConfig{}, fmt.Errorf("the config of legate login: read %s: %w", p, err)
	}
	c, err := parseLoginConfig(b)
	if err != nil {
		return loginConfig{}, fmt.Errorf("the config of legate login, %s, is damaged: %v; remove it (legate logout) and sign in again (legate login), or set %s and %s", p, err, EnvURL, EnvAPIKey)
	}
	return c, nil
}

// writeLogin stores c (mode 0600, its directory 0700), replacing the file
// at once: a crash leaves the old one or the new one.
func (a *app) writeLogin(c loginConfig) (string, error) {
	p, err := a.configPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	return p, atomicfile.WriteFile(p, formatLoginConfig(c), 0o600)
}
