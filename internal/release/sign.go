package release

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The signature of a release binary is a small text file next to it
// (BINARY.sig):
//
//	legate-release-signature v1
//	version v1.2.3
//	os linux
//	arch amd64
//	sha256 <64 hex digits of the binary's SHA-256>
//	signature <base64 of the ed25519 signature>
//
// The signature covers the first five lines exactly as written (each
// ending in "\n"): the binary's digest together with its version, OS and
// architecture, so a signature cannot be moved to another binary, version
// or platform.
//
// A release also holds legate-delegate (the delegate alone, go build
// -tags delegate). Its signature, v2, names the binary on a line of its
// own after the header, so that neither binary's signature can pass for
// the other's:
//
//	legate-release-signature v2
//	binary legate-delegate
//	version v1.2.3
//	…
//
// legate itself keeps v1, which every watcher reads.
const (
	signatureHeader   = "legate-release-signature v1"
	signatureHeaderV2 = "legate-release-signature v2"
)

// The binaries of a release.
const (
	BinaryLegate   = "legate"
	BinaryDelegate = "legate-delegate"
)

// MaxSignatureSize bounds a signature file; a larger one is not one.
const MaxSignatureSize = 4 << 10

// Manifest is what a signature says of a binary.
type Manifest struct {
	// Binary is BinaryLegate ("" means it too) or BinaryDelegate.
	Binary  string
	Version string
	OS      string
	Arch    string
	// SHA256 is the binary's digest, 32 bytes.
	SHA256 []byte
}

// Signature is a manifest with its signature.
type Signature struct {
	Manifest
	Sig []byte
}

// Which is the binary the manifest is of: m.Binary, "" read as
// BinaryLegate.
func (m Manifest) Which() string {
	if m.Binary == "" {
		return BinaryLegate
	}
	return m.Binary
}

// signedText is the text a signature covers: v1 for legate, v2 with the
// binary's name for legate-delegate.
func (m Manifest) signedText() []byte {
	var b []byte
	if m.Which() == BinaryLegate {
		b = fmt.Appendf(b, "%s\n", signatureHeader)
	} else {
		b = fmt.Appendf(b, "%s\nbinary %s\n", signatureHeaderV2, m.Binary)
	}
	return fmt.Appendf(b, "version %s\nos %s\narch %s\nsha256 %s\n",
		m.Version, m.OS, m.Arch, hex.EncodeToString(m.SHA256))
}

func (m Manifest) check() error {
	switch {
	case m.Which() != BinaryLegate && m.Which() != BinaryDelegate:
		return fmt.Errorf("binary %q is not %s or %s", m.Binary, BinaryLegate, BinaryDelegate)
	case !ValidVersionName(m.Version):
		return fmt.Errorf("version %q is not a valid version name", m.Version)
	case !validPlatformName(m.OS):
		return fmt.Errorf("os %q is not a valid name", m.OS)
	case !validPlatformName(m.Arch):
		return fmt.Errorf("arch %q is not a valid name", m.Arch)
	case len(m.SHA256) != sha256.Size:
		return errors.New("sha256 must be 32 bytes")
	}
	return nil
}

func validPlatformName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Encode writes the signature file's text.
func (s Signature) Encode() []byte {
	b := s.signedText()
	return fmt.Appendf(b, "signature %s\n", base64.StdEncoding.EncodeToString(s.Sig))
}

// DecodeSignature parses a signature file. It checks the form only: use
// Verify to check the signature itself.
func DecodeSignature(b []byte) (Signature, error) {
	if len(b) > MaxSignatureSize {
		return Signature{}, fmt.Errorf("signature file too large (%d bytes, at most %d)", len(b), MaxSignatureSize)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	keys := []string{"version", "os", "arch", "sha256", "signature"}
	switch lines[0] {
	case signatureHeader:
	case signatureHeaderV2:
		keys = append([]string{"binary"}, keys...)
	default:
		return Signature{}, fmt.Errorf("not a legate release signature (first line %q)", cut(lines[0]))
	}
	if len(lines) != len(keys)+1 {
		return Signature{}, fmt.Errorf("a signature file of this version has %d lines, this one %d", len(keys)+1, len(lines))
	}
	var s Signature
	var digest, sig string
	for i, key := range keys {
		k, v, ok := strings.Cut(lines[i+1], " ")
		if !ok || k != key || v == "" {
			return Signature{}, fmt.Errorf("line %d: want %q and a value, got %q", i+2, key, cut(lines[i+1]))
		}
		switch key {
		case "binary":
			if v == BinaryLegate {
				return Signature{}, fmt.Errorf("line 2: %s is signed in the v1 form", BinaryLegate)
			}
			s.Binary = v
		case "version":
			s.Version = v
		case "os":
			s.OS = v
		case "arch":
			s.Arch = v
		case "sha256":
			digest = v
		case "signature":
			sig = v
		}
	}
	var err error
	if s.SHA256, err = hex.DecodeString(digest); err != nil || len(s.SHA256) != sha256.Size || hex.EncodeToString(s.SHA256) != digest {
		return Signature{}, errors.New("sha256: want 64 lower-case hex digits")
	}
	if s.Sig, err = base64.StdEncoding.DecodeString(sig); err != nil || len(s.Sig) != ed25519.SignatureSize {
		return Signature{}, fmt.Errorf("signature: want the base64 of %d bytes", ed25519.SignatureSize)
	}
	if err := s.check(); err != nil {
		return Signature{}, err
	}
	return s, nil
}

func cut(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Sign signs a binary's manifest with key.
func Sign(key ed25519.PrivateKey, m Manifest) (Signature, error) {
	if err := m.check(); err != nil {
		return Signature{}, err
	}
	return Signature{Manifest: m, Sig: ed25519.Sign(key, m.signedText())}, nil
}

// Digest is the SHA-256 of what r holds.
func Digest(r io.Reader) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// FileDigest is the SHA-256 of a file.
func FileDigest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := Digest(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return d, nil
}

// Verify checks that s is a signature by key of the legate binary whose
// digest is digest, built as version for goos/goarch: any difference is
// an error that says which.
func Verify(key ed25519.PublicKey, s Signature, digest []byte, version, goos, goarch string) error {
	return VerifyBinary(key, s, BinaryLegate, digest, version, goos, goarch)
}

// VerifyBinary is Verify for the binary named binary (BinaryLegate or
// BinaryDelegate).
func VerifyBinary(key ed25519.PublicKey, s Signature, binary string, digest []byte, version, goos, goarch string) error {
	if len(key) != ed25519.PublicKeySize {
		return errors.New("no valid public key to verify with")
	}
	if !ed25519.Verify(key, s.signedText(), s.Sig) {
		return errors.New("the signature does not verify with the trusted public key (signed with another key, or altered)")
	}
	switch {
	case s.Which() != binary:
		return fmt.Errorf("the signature is for %s, not %s", s.Which(), binary)
	case s.Version != version:
		return fmt.Errorf("the signature is for version %s, not %s", s.Version, version)
	case s.OS != goos || s.Arch != goarch:
		return fmt.Errorf("the signature is for %s/%s, not %s/%s", s.OS, s.Arch, goos, goarch)
	case !bytes.Equal(s.SHA256, digest):
		return errors.New("the binary's SHA-256 differs from the signed one (corrupted or replaced)")
	}
	return nil
}

// Key files. A private key file holds a header line and the base64 of the
// 32-byte ed25519 seed; a public key file the base64 of the 32-byte
// public key on one line (the form LEGATE_UPGRADE_PUBLIC_KEY takes too).
const privateKeyHeader = "legate-release-private-key v1"

// GenerateKey makes a key pair and returns the two files' contents.
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	private = fmt.Appendf(nil, "%s\n%s\n", privateKeyHeader, base64.StdEncoding.EncodeToString(priv.Seed()))
	public = fmt.Appendf(nil, "%s\n", base64.StdEncoding.EncodeToString(pub))
	return private, public, nil
}

// ParsePrivateKey reads a private key file's contents.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	head, rest, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if strings.TrimSpace(head) != privateKeyHeader {
		return nil, errors.New("not a legate release private key (legate release keygen writes one)")
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("the private key file is damaged: want the base64 of a 32-byte seed")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads a public key: the base64 of 32 bytes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not a legate release public key: want the base64 of 32 bytes")
	}
	return ed25519.PublicKey(b), nil
}

// LoadPublicKey reads LEGATE_UPGRADE_PUBLIC_KEY's value: the key itself
// (base64) or the path of a public key file.
func LoadPublicKey(value string) (ed25519.PublicKey, error) {
	if k, err := ParsePublicKey(value); err == nil {
		return k, nil
	}
	b, err := os.ReadFile(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("LEGATE_UPGRADE_PUBLIC_KEY is neither a base64 public key nor a readable file: %w", err)
	}
	k, err := ParsePublicKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", value, err)
	}
	return k, nil
}

// BinaryName is the file name of a release binary in a release
// directory: DIR/VERSION/legate-OS-ARCH, its signature next to it with
// ".sig" appended.
func BinaryName(goos, goarch string) string { return ReleaseFileName(BinaryLegate, goos, goarch) }

// ReleaseFileName is the file name of the release binary binary
// (BinaryLegate or BinaryDelegate): BINARY-OS-ARCH.
func ReleaseFileName(binary, goos, goarch string) string { return binary + "-" + goos + "-" + goarch }

// HoldOwn copies the running binary exe of version into the release
// directory dir (DIR/VERSION/legate-GOOS-GOARCH), unless a binary is
// there already or version is not a release name, so that a manager can
// always serve its own version once it is signed (legate release sign).
// It returns the path it holds the binary at ("" when it holds none).
func HoldOwn(dir, version, goos, goarch, exe string) (string, error) {
	return HoldOwnBinary(dir, BinaryLegate, version, goos, goarch, exe)
}

// HoldOwnBinary is HoldOwn for the binary named binary (BinaryDelegate:
// the legate-delegate beside the manager's binary).
func HoldOwnBinary(dir, binary, version, goos, goarch, exe string) (string, error) {
	if _, ok := ParseSemver(version); !ok || !ValidVersionName(version) || dir == "" {
		return "", nil
	}
	dst := filepath.Join(dir, version, ReleaseFileName(binary, goos, goarch))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	src, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".hold-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}
