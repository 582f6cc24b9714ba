package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/legate-dev/legate/internal/atomicfile"
)

// EnvMasterKey names the environment variable that holds the master keys
// when they are not in a key file: one key, or several separated by commas
// (the first seals, the others only open), each base64 or hex.
const EnvMasterKey = "LEGATE_MASTER_KEY"

// maxKeyFile bounds a key file (a ring of a few keys is a few hundred bytes).
const maxKeyFile = 64 << 10

// ParseKey decodes one master key written as base64 (standard or URL
// alphabet, padded or not) or hex. Errors never repeat the text.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var b []byte
	var err error
	switch len(s) {
	case 2 * KeySize: // hex
		b, err = hex.DecodeString(s)
	case base64.StdEncoding.EncodedLen(KeySize), base64.RawStdEncoding.EncodedLen(KeySize):
		t := strings.TrimRight(s, "=")
		if strings.ContainsAny(t, "-_") {
			b, err = base64.RawURLEncoding.DecodeString(t)
		} else {
			b, err = base64.RawStdEncoding.DecodeString(t)
		}
	default:
		return nil, fmt.Errorf("want %d bytes written as base64 (%d characters) or hex (%d), got %d characters",
			KeySize, base64.StdEncoding.EncodedLen(KeySize), 2*KeySize, len(s))
	}
	if err != nil || len(b) != KeySize {
		return nil, fmt.Errorf("want %d bytes written as base64 or hex; this is neither", KeySize)
	}
	return b, nil
}

// EncodeKey writes a master key as ParseKey reads it (standard base64).
func EncodeKey(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }

// ParseEnv reads the value of LEGATE_MASTER_KEY: keys separated by commas,
// the first one the primary.
func ParseEnv(v string) (*Ring, error) {
	var raws [][]byte
	for i, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			return nil, fmt.Errorf("%s: key %d is empty (separate keys with commas, the sealing key first)", EnvMasterKey, i+1)
		}
		raw, err := ParseKey(part)
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w (make one with `legate manager new-key` or `openssl rand -base64 32`)", EnvMasterKey, i+1, err)
		}
		raws = append(raws, raw)
	}
	return NewRing(raws[0], raws[1:]...)
}

// ParseKeyFile reads a key file: one key per line, "<key id> <key>" or the
// key alone, the first one the primary; blank lines and lines starting
// with # are ignored. A key ID that does not match its key is an error (a
// damaged or hand-edited file).
func ParseKeyFile(data []byte) (*Ring, error) {
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("a key file is at most %d bytes", maxKeyFile)
	}
	var raws [][]byte
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		var id, text string
		switch len(fields) {
		case 1:
			text = fields[0]
		case 2:
			id, text = fields[0], fields[1]
		default:
			return nil, fmt.Errorf("line %d: want \"<key id> <key>\"", n+1)
		}
		raw, err := ParseKey(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if id != "" && id != KeyID(raw) {
			return nil, fmt.Errorf("line %d: key ID %q does not match its key (which is %s): the file is damaged", n+1, id, KeyID(raw))
		}
		raws = append(raws, raw)
	}
	if len(raws) == 0 {
		return nil, errors.New("no key in the file")
	}
	return NewRing(raws[0], raws[1:]...)
}

// FormatKeyFile writes r as ParseKeyFile reads it.
func FormatKeyFile(r *Ring) []byte {
	var b bytes.Buffer
	b.WriteString(`# legate master keys (docs/secrets-at-rest.md). Keep this file private
# (mode 0600) and back it up apart from the database: without it, the
# secrets sealed in the database cannot be read.
# One key per line, "<key id> <key>": the first key seals, the others only
# open (kept by a rotation until rotate-key --drop-old).
`)
	for _, k := range r.keys {
		fmt.Fprintf(&b, "%s %s\n", k.id, EncodeKey(k.raw))
	}
	return b.Bytes()
}

// ReadKeyFile reads the key file at path. A file that group or others may
// read or write is refused, with the chmod that fixes it. A missing file is
// an error that wraps fs.ErrNotExist.
func ReadKeyFile(path string) (*Ring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("master key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("master key file %s may be read or changed by other users (mode %04o); make it private: chmod 600 %s",
			path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read master key file %s: %w", path, err)
	}
	r, err := ParseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("master key file %s: %w", path, err)
	}
	return r, nil
}

// CreateKeyFile writes r to a new file at path (mode 0600), whole or not
// at all: it fails with an error wrapping fs.ErrExist if the file exists
// (another process made it first: read that one).
func CreateKeyFile(path string, r *Ring) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create master key file: %w", err)
	}
	// Written aside, then linked into place: the link fails if the file
	// exists, and a crash never leaves a partial key file.
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("create master key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(FormatKeyFile(r))
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write master key file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("create master key file: %w", err)
	}
	return syncDir(dir)
}

// WriteKeyFile replaces the key file at path with r, atomically (a crash
// leaves the old file or the new one, never a partial one), mode 0600.
func WriteKeyFile(path string, r *Ring) error {
	if err := atomicfile.WriteFile(path, FormatKeyFile(r), 0o600); err != nil {
		return fmt.Errorf("write master key file %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a new or renamed file of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
