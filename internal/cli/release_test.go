package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/release"
)

// TestReleaseKeygenAndSign: keygen writes a key pair once; sign writes a
// signature that verifies with the public key, for the version and
// platform given; a file whose version cannot be read is refused.
func TestReleaseKeygenAndSign(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "release")
	if r := runCLI(ctx, nil, "", "release", "keygen", "--out", out); r.err != nil {
		t.Fatalf("keygen: %v\n%s", r.err, r.stderr)
	}
	if st, err := os.Stat(out + ".key"); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v, %v", st, err)
	}
	if r := runCLI(ctx, nil, "", "release", "keygen", "--out", out); r.err == nil || !strings.Contains(r.stderr, "exists") {
		t.Errorf("keygen over existing files: %v %s", r.err, r.stderr)
	}
	bin := filepath.Join(dir, "legate-linux-amd64")
	if err := os.WriteFile(bin, []byte("not a go binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(ctx, nil, "", "release", "sign", "--key", out+".key", bin); r.err == nil || !strings.Contains(r.stderr, "--version") {
		t.Errorf("sign of a binary without build information: %v", r.err)
	}
	if r := runCLI(ctx, nil, "", "release", "sign", "--key", out+".key", "--version", "v1.2.3", "--os", "linux", "--arch", "amd64", bin); r.err != nil {
		t.Fatalf("sign: %v", r.err)
	}
	b, err := os.ReadFile(bin + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := release.DecodeSignature(b)
	if err != nil {
		t.Fatal(err)
	}
	pubText, err := os.ReadFile(out + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := release.ParsePublicKey(string(pubText))
	if err != nil {
		t.Fatal(err)
	}
	d, err := release.FileDigest(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := release.Verify(pub, sig, d, "v1.2.3", "linux", "amd64"); err != nil {
		t.Errorf("the signature does not verify: %v", err)
	}
	if r := runCLI(ctx, nil, "", "release", "sign", "--key", bin, "--version", "v1", "--os", "linux", "--arch", "amd64", bin); r.err == nil ||
		!strings.Contains(r.stderr, "not a legate release private key") {
		t.Errorf("sign with a file that is not a key: %v", r.err)
	}

	// legate-delegate: a signature that names it, which legate's does not pass for.
	lite := filepath.Join(dir, "legate-delegate-linux-amd64")
	if err := os.WriteFile(lite, []byte("not a go binary either"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(ctx, nil, "", "release", "sign", "--key", out+".key", "--binary", "legate-delegate", "--version", "v1.2.3", "--os", "linux", "--arch", "amd64", lite); r.err != nil || !strings.Contains(r.stdout, "legate-delegate v1.2.3 linux/amd64") {
		t.Fatalf("sign legate-delegate: %v %s%s", r.err, r.stdout, r.stderr)
	}
	b, err = os.ReadFile(lite + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if sig, err = release.DecodeSignature(b); err != nil {
		t.Fatal(err)
	}
	if d, err = release.FileDigest(lite); err != nil {
		t.Fatal(err)
	}
	if err := release.VerifyBinary(pub, sig, release.BinaryDelegate, d, "v1.2.3", "linux", "amd64"); err != nil {
		t.Errorf("legate-delegate's signature does not verify: %v", err)
	}
	if err := release.Verify(pub, sig, d, "v1.2.3", "linux", "amd64"); err == nil {
		t.Error("legate-delegate's signature verifies as legate's")
	}
	if r := runCLI(ctx, nil, "", "release", "sign", "--key", out+".key", "--binary", "manager", "--version", "v1.2.3", "--os", "linux", "--arch", "amd64", lite); r.err == nil || !strings.Contains(r.stderr, "legate or legate-delegate") {
		t.Errorf("sign with --binary manager: %v %s", r.err, r.stderr)
	}
}
