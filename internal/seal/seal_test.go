package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustRing(t testing.TB, keys ...[]byte) *Ring {
	t.Helper()
	r, err := NewRing(keys[0], keys[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func TestSealOpen(t *testing.T) {
	t.Parallel()
	r := mustRing(t, testKey(1))
	for _, plain := range []string{"", "s3cret", strings.Repeat("x", 100000), "\x00\xff"} {
		s := r.Seal([]byte(plain), "task/t1/secret_env")
		if !IsSealed(s) || !strings.HasPrefix(s, Prefix(r.Primary())) {
			t.Fatalf("sealed value %q lacks its header", s)
		}
		if plain != "" && strings.Contains(s, plain) {
			t.Fatalf("sealed value contains the plaintext")
		}
		got, err := r.Open(s, "task/t1/secret_env")
		if err != nil || string(got) != plain {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
		if id, err := SealedKeyID(s); err != nil || id != r.Primary() {
			t.Fatalf("SealedKeyID = %q, %v", id, err)
		}
	}
	// Two seals of one value differ (random nonce).
	if first, second := r.Seal([]byte("a"), "c"), r.Seal([]byte("a"), "c"); first == second {
		t.Error("sealing is deterministic")
	}
}

// TestTamper: a sealed value that was altered anywhere, or copied to
// another row (context), does not open, and says why.
func TestTamper(t *testing.T) {
	t.Parallel()
	r := mustRing(t, testKey(1), testKey(2))
	s := r.Seal([]byte("s3cret"), "task/t1/secret_env")
	other := mustRing(t, testKey(2)).Seal([]byte("s3cret"), "task/t1/secret_env")
	id, body, _ := parse(s)
	box, _ := base64.RawURLEncoding.DecodeString(body)
	flip := func(i int) string {
		b := bytes.Clone(box)
		b[i] ^= 1
		return "v1:" + id + ":" + base64.RawURLEncoding.EncodeToString(b)
	}
	cases := []struct {
		name, value, context string
		want                 error
	}{
		{"moved to another task", s, "task/t2/secret_env", ErrAuth},
		{"moved to a setting", s, "setting/session_key", ErrAuth},
		{"nonce altered", flip(0), "task/t1/secret_env", ErrAuth},
		{"ciphertext altered", flip(13), "task/t1/secret_env", ErrAuth},
		{"tag altered", flip(len(box) - 1), "task/t1/secret_env", ErrAuth},
		{"key ID swapped", "v1:" + mustRing(t, testKey(2)).Primary() + ":" + body, "task/t1/secret_env", ErrAuth},
		{"truncated", s[:len(s)-4], "task/t1/secret_env", ErrAuth},
		{"too short", "v1:" + id + ":AAAA", "task/t1/secret_env", ErrAuth},
		{"not base64", "v1:" + id + ":!!!!", "task/t1/secret_env", ErrAuth},
		{"plaintext", "s3cret", "task/t1/secret_env", ErrMalformed},
		{"other version", "v2" + s[2:], "task/t1/secret_env", ErrMalformed},
		{"bad key ID", "v1:XYZ:" + body, "task/t1/secret_env", ErrMalformed},
		{"sealed by the other key, opens", other, "task/t1/secret_env", nil},
	}
	for _, c := range cases {
		_, err := r.Open(c.value, c.context)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Open error %v, want %v", c.name, err, c.want)
		}
	}
}

func TestUnknownKey(t *testing.T) {
	t.Parallel()
	a, b := mustRing(t, testKey(1)), mustRing(t, testKey(2))
	_, err := b.Open(a.Seal([]byte("x"), "c"), "c")
	var uk *UnknownKeyError
	if !errors.As(err, &uk) || uk.ID != a.Primary() || !cmp.Equal(uk.Have, []string{b.Primary()}) {
		t.Fatalf("Open with another key: %v", err)
	}
	if !strings.Contains(err.Error(), a.Primary()) {
		t.Errorf("error %q does not name the key", err)
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	a := mustRing(t, testKey(1))
	old := a.Seal([]byte("v"), "c")
	b, err := a.Rotated(testKey(2))
	if err != nil {
		t.Fatal(err)
	}
	if b.Primary() != KeyID(testKey(2)) || !cmp.Equal(b.IDs(), []string{KeyID(testKey(2)), KeyID(testKey(1))}) {
		t.Fatalf("rotated ring: %v", b.IDs())
	}
	if got, err := b.Open(old, "c"); err != nil || string(got) != "v" {
		t.Fatalf("rotated ring does not open the old value: %q, %v", got, err)
	}
	fresh := b.Seal([]byte("w"), "c")
	if id, _ := SealedKeyID(fresh); id != b.Primary() {
		t.Fatalf("rotated ring seals with %s", id)
	}
	only := b.PrimaryOnly()
	if _, err := only.Open(old, "c"); err == nil {
		t.Fatal("the primary alone opens a value of the dropped key")
	}
	if got, err := only.Open(fresh, "c"); err != nil || string(got) != "w" {
		t.Fatalf("primary alone: %q, %v", got, err)
	}
	// Rotating to a key already in the ring makes it primary, once.
	c, err := b.Rotated(testKey(1))
	if err != nil || !cmp.Equal(c.IDs(), []string{KeyID(testKey(1)), KeyID(testKey(2))}) {
		t.Fatalf("rotate back: %v, %v", c.IDs(), err)
	}
}

func TestKeyID(t *testing.T) {
	t.Parallel()
	id := KeyID(testKey(1))
	if !validID(id) || id == KeyID(testKey(2)) || id != KeyID(testKey(1)) {
		t.Fatalf("KeyID: %q", id)
	}
	if strings.Contains(hex.EncodeToString(testKey(1)), id) {
		t.Fatal("the key ID is part of the key")
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	raw := make([]byte, KeySize)
	for i := range raw {
		raw[i] = byte(i*7 + 250) // includes bytes that give + / - _ in base64
	}
	for _, text := range []string{
		base64.StdEncoding.EncodeToString(raw),
		base64.RawStdEncoding.EncodeToString(raw),
		base64.URLEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw),
		hex.EncodeToString(raw),
		strings.ToUpper(hex.EncodeToString(raw)),
		"  " + EncodeKey(raw) + "\n",
	} {
		got, err := ParseKey(text)
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("ParseKey(%q) = %x, %v", text, got, err)
		}
	}
	secret := "c2hvcnQta2V5LXRoYXQtbXVzdC1ub3QtYmUtZWNob2Vk" // 44 chars, 33 bytes
	for _, text := range []string{"", "short", secret, strings.Repeat("z", 64), hex.EncodeToString(raw)[:62] + "zz"} {
		_, err := ParseKey(text)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted", text)
			continue
		}
		if text != "" && strings.Contains(err.Error(), text) {
			t.Errorf("ParseKey error repeats the key: %v", err)
		}
	}
}

func TestParseEnv(t *testing.T) {
	t.Parallel()
	r, err := ParseEnv(EncodeKey(testKey(2)) + ", " + hex.EncodeToString(testKey(1)))
	if err != nil || !cmp.Equal(r.IDs(), []string{KeyID(testKey(2)), KeyID(testKey(1))}) {
		t.Fatalf("ParseEnv: %v, %v", r, err)
	}
	for _, c := range []struct{ value, want string }{
		{"", "LEGATE_MASTER_KEY: key 1 is empty"},
		{"not-a-key-at-all", "LEGATE_MASTER_KEY: key 1: want 32 bytes"},
		{EncodeKey(testKey(1)) + ",", "LEGATE_MASTER_KEY: key 2 is empty"},
		{EncodeKey(testKey(1)) + "," + EncodeKey(testKey(1))[:40], "LEGATE_MASTER_KEY: key 2: want 32 bytes"},
	} {
		_, err := ParseEnv(c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseEnv(%q) = %v, want %q", c.value, err, c.want)
			continue
		}
		if strings.Contains(c.want, "want 32 bytes") && !strings.Contains(err.Error(), "legate manager new-key") {
			t.Errorf("ParseEnv(%q) error does not say how to make a key: %v", c.value, err)
		}
		if strings.Contains(err.Error(), EncodeKey(testKey(1))[:40]) {
			t.Errorf("ParseEnv error repeats a key: %v", err)
		}
	}
}

func TestKeyFileRoundTrip(t *testing.T) {
	t.Parallel()
	r := mustRing(t, testKey(3), testKey(1))
	back, err := ParseKeyFile(FormatKeyFile(r))
	if err != nil || !cmp.Equal(back.IDs(), r.IDs()) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	// A key alone on a line, comments and blank lines.
	back, err = ParseKeyFile([]byte("# c\n\n  " + EncodeKey(testKey(4)) + "  \n"))
	if err != nil || back.Primary() != KeyID(testKey(4)) {
		t.Fatalf("bare key: %v, %v", back, err)
	}
	for _, c := range []struct{ text, want string }{
		{"", "no key"},
		{"# only comments\n", "no key"},
		{KeyID(testKey(1)) + " " + EncodeKey(testKey(2)), "line 1: key ID"},
		{"a b c", "line 1: want"},
		{"\n" + KeyID(testKey(1)) + " nope", "line 2: want 32 bytes"},
	} {
		_, err := ParseKeyFile([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseKeyFile(%q) = %v, want %q", c.text, err, c.want)
		}
	}
}

func TestReadKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "master.key")
	if _, err := ReadKeyFile(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	r := mustRing(t, testKey(1))
	if err := CreateKeyFile(path, r); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created file: %v, %v", fi.Mode(), err)
	}
	if err := CreateKeyFile(path, mustRing(t, testKey(2))); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v", err)
	}
	got, err := ReadKeyFile(path)
	if err != nil || got.Primary() != r.Primary() {
		t.Fatalf("read: %v, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %04o: %v, want the chmod to run", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	// WriteKeyFile replaces it, private.
	next, _ := r.Rotated(testKey(2))
	if err := WriteKeyFile(path, next); err != nil {
		t.Fatal(err)
	}
	got, err = ReadKeyFile(path)
	if err != nil || !cmp.Equal(got.IDs(), next.IDs()) {
		t.Fatalf("after WriteKeyFile: %v, %v", got, err)
	}
	if _, err := ReadKeyFile(dir); err == nil {
		t.Error("a directory was read as a key file")
	}
}

// BenchmarkSealOpen seals and opens a task's secret values (a small JSON
// object): the cost sealing adds to a submit and an acquire.
func BenchmarkSealOpen(b *testing.B) {
	r := mustRing(b, testKey(1))
	plain := []byte(`{"API_TOKEN":"s3cr3t-0123456789abcdef","PASSWORD":"hunter2"}`)
	b.ReportAllocs()
	for b.Loop() {
		s := r.Seal(plain, "task/t_abcdefghijklmnop/secret_env")
		if _, err := r.Open(s, "task/t_abcdefghijklmnop/secret_env"); err != nil {
			b.Fatal(err)
		}
	}
}
