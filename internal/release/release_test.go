package release

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
)

func TestAccepted(t *testing.T) {
	for _, c := range []struct {
		manager, delegate string
		want              bool
	}{
		{"v1.4.2", "v1.4.2", true},
		{"v1.4.2", "v1.3.0", true},
		{"v1.4.2", "v1.3.0-rc.1", true},
		{"v1.4.2", "v1.2.9", false},
		{"v1.4.2", "v1.5.0", true},
		{"v1.4.2", "v2.0.0", true},
		{"v1.4.2", "v0.9.0", false},
		{"v2.0.0", "v1.0.0", true},
		{"v2.0.0", "v0.9.9", false},
		{"v0.0.1", "v0.0.0", true},
		{"(devel)", "v0.0.1", true},
		{"dev", "v0.0.1", true},
		{"v1.4.2", "(devel)", true},
		{"v1.4.2", "", true},
		{"1.4", "1.3.7", true},
		{"1.4", "1.2", false},
		{"v1.4.2", "v0.0.0-20261123101500-0f85cf4e8c12+dirty", true},
		{"v1.4.2", "v1.2.4-0.20261123101500-0f85cf4e8c12", true},
		{"v0.0.0-20261123101500-0f85cf4e8c12", "v0.0.1", true},
	} {
		if got := Accepted(c.manager, c.delegate); got != c.want {
			t.Errorf("Accepted(%q, %q) = %v, want %v", c.manager, c.delegate, got, c.want)
		}
	}
}

func TestSameVersion(t *testing.T) {
	if !SameVersion("v1.2.3", "1.2.3") || SameVersion("v1.2.3", "v1.2.4") || !SameVersion("dev", "dev") || SameVersion("dev", "(devel)") {
		t.Error("SameVersion is wrong")
	}
}

func TestSignVerify(t *testing.T) {
	privFile, pubFile, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(string(pubFile))
	if err != nil {
		t.Fatal(err)
	}
	bin := []byte("#!/bin/sh\necho legate\n")
	d, err := Digest(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := Sign(priv, Manifest{Version: "v1.2.3", OS: "linux", Arch: "amd64", SHA256: d})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeSignature(sig.Encode())
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, sig.Encode())
	}
	if err := Verify(pub, dec, d, "v1.2.3", "linux", "amd64"); err != nil {
		t.Fatalf("verify: %v", err)
	}
	_, otherPub, _ := GenerateKey()
	other, _ := ParsePublicKey(string(otherPub))
	corrupted, _ := Digest(bytes.NewReader(append(bin, 'x')))
	for name, c := range map[string]struct {
		key               ed25519.PublicKey
		digest            []byte
		version, os, arch string
		want              string
	}{
		"other key":     {other, d, "v1.2.3", "linux", "amd64", "does not verify"},
		"corrupted":     {pub, corrupted, "v1.2.3", "linux", "amd64", "SHA-256 differs"},
		"other version": {pub, d, "v1.2.4", "linux", "amd64", "not v1.2.4"},
		"other arch":    {pub, d, "v1.2.3", "linux", "arm64", "not linux/arm64"},
	} {
		err := Verify(c.key, dec, c.digest, c.version, c.os, c.arch)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Verify = %v, want an error with %q", name, err, c.want)
		}
	}
	// A manifest edited to claim another version no longer verifies.
	moved := dec
	moved.Version = "v1.2.4"
	if err := Verify(pub, moved, d, "v1.2.4", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a signature moved to another version verifies: %v", err)
	}
}

// TestDelegateBinarySignature: legate-delegate's signature (v2) names the
// binary, so neither binary's signature passes for the other's, and
// legate's stays in the v1 form older watchers read.
func TestDelegateBinarySignature(t *testing.T) {
	privFile, pubFile, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := ParsePrivateKey(privFile)
	pub, _ := ParsePublicKey(string(pubFile))
	d := make([]byte, 32)
	m := Manifest{Version: "v1.2.3", OS: "linux", Arch: "amd64", SHA256: d}
	full, err := Sign(priv, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Binary = BinaryDelegate
	lite, err := Sign(priv, m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(full.Encode()), signatureHeader+"\nversion ") {
		t.Errorf("legate's signature is not v1:\n%s", full.Encode())
	}
	if !strings.HasPrefix(string(lite.Encode()), signatureHeaderV2+"\nbinary legate-delegate\nversion v1.2.3\n") {
		t.Errorf("legate-delegate's signature:\n%s", lite.Encode())
	}
	dec, err := DecodeSignature(lite.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBinary(pub, dec, BinaryDelegate, d, "v1.2.3", "linux", "amd64"); err != nil {
		t.Errorf("legate-delegate's signature: %v", err)
	}
	if err := Verify(pub, dec, d, "v1.2.3", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "for legate-delegate, not legate") {
		t.Errorf("legate-delegate's signature verifies legate: %v", err)
	}
	fullDec, _ := DecodeSignature(full.Encode())
	if err := VerifyBinary(pub, fullDec, BinaryDelegate, d, "v1.2.3", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "for legate, not legate-delegate") {
		t.Errorf("legate's signature verifies legate-delegate: %v", err)
	}
	// Renaming the binary in the text breaks the signature.
	renamed := dec
	renamed.Binary = ""
	if err := Verify(pub, renamed, d, "v1.2.3", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a v2 signature rewritten as v1 verifies: %v", err)
	}
	if _, err := Sign(priv, Manifest{Binary: "legate-manager", Version: "v1.2.3", OS: "linux", Arch: "amd64", SHA256: d}); err == nil {
		t.Error("signed an unknown binary")
	}
	if got := ReleaseFileName(BinaryDelegate, "linux", "arm64"); got != "legate-delegate-linux-arm64" {
		t.Errorf("ReleaseFileName = %q", got)
	}
}

func TestDecodeSignatureRefusesBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":      "",
		"header":     "something else\nversion v1\nos linux\narch amd64\nsha256 00\nsignature AA==\n",
		"short hash": signatureHeader + "\nversion v1\nos linux\narch amd64\nsha256 00\nsignature AA==\n",
		"order":      signatureHeader + "\nos linux\nversion v1\narch amd64\nsha256 00\nsignature AA==\n",
		"big":        strings.Repeat("x", MaxSignatureSize+1),
		"v2 without binary": signatureHeaderV2 + "\nversion v1.0.0\nos linux\narch amd64\nsha256 " + strings.Repeat("0", 64) +
			"\nsignature " + strings.Repeat("A", 86) + "==\n",
		"v2 naming legate": signatureHeaderV2 + "\nbinary legate\nversion v1.0.0\nos linux\narch amd64\nsha256 " + strings.Repeat("0", 64) +
			"\nsignature " + strings.Repeat("A", 86) + "==\n",
		"v2 unknown binary": signatureHeaderV2 + "\nbinary legate-x\nversion v1.0.0\nos linux\narch amd64\nsha256 " + strings.Repeat("0", 64) +
			"\nsignature " + strings.Repeat("A", 86) + "==\n",
	} {
		if _, err := DecodeSignature([]byte(in)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	// The same lines naming legate-delegate are a signature.
	ok := signatureHeaderV2 + "\nbinary legate-delegate\nversion v1.0.0\nos linux\narch amd64\nsha256 " + strings.Repeat("0", 64) +
		"\nsignature " + strings.Repeat("A", 86) + "==\n"
	if _, err := DecodeSignature([]byte(ok)); err != nil {
		t.Errorf("a well-formed v2 signature: %v", err)
	}
}

func FuzzDecodeSignature(f *testing.F) {
	priv, _, _ := GenerateKey()
	key, _ := ParsePrivateKey(priv)
	s, _ := Sign(key, Manifest{Version: "v1.0.0", OS: "linux", Arch: "amd64", SHA256: make([]byte, 32)})
	f.Add(s.Encode())
	f.Add([]byte(signatureHeader + "\n"))
	s2, _ := Sign(key, Manifest{Binary: BinaryDelegate, Version: "v1.0.0", OS: "linux", Arch: "amd64", SHA256: make([]byte, 32)})
	f.Add(s2.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSignature(b)
		if err != nil {
			return
		}
		// What decodes encodes back to the same text.
		again, err := DecodeSignature(s.Encode())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(again.Encode(), s.Encode()) {
			t.Fatalf("not stable")
		}
	})
}

func FuzzParseSemver(f *testing.F) {
	for _, s := range []string{"v1.2.3", "1.2", "v1.2.3-rc.1+x", "(devel)", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseSemver(s)
		if !ok {
			return
		}
		w, ok := ParseSemver(v.String())
		if !ok || w.Compare(v) != 0 {
			t.Fatalf("%q → %v does not parse back", s, v)
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	_, pub, _ := GenerateKey()
	f.Add(string(pub))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err == nil && len(k) != 32 {
			t.Fatal("short key accepted")
		}
	})
}

func TestDowngrade(t *testing.T) {
	for _, c := range []struct {
		running, wanted string
		want            bool
	}{
		{"v1.4.2", "v1.4.3", false},
		{"v1.4.2", "v1.5.0-rc.1", false},
		{"v1.4.2", "v1.4.1", true},
		{"v1.4.2", "v0.9.0", true},
		{"v1.4.2", "v1.4.2-rc.1", true},
		{"1.4.2", "v1.4.2", false},
		{"v1.4.2", "nightly", true},
		{"v1.4.2", "v0.0.0-20261123101500-0f85cf4e8c12", true},
		{"dev", "v1.0.0", false},
		{"(devel)", "v0.1.0", false},
	} {
		if got := Downgrade(c.running, c.wanted); got != c.want {
			t.Errorf("Downgrade(%q, %q) = %v, want %v", c.running, c.wanted, got, c.want)
		}
	}
}

// TestRefusedFrom: a delegate the manager's next minor version refuses is
// told which; one it still accepts, one refused already and a development
// build are not.
func TestRefusedFrom(t *testing.T) {
	for _, tc := range []struct {
		manager, delegate, want string
	}{
		{"v1.3.2", "v1.2.0", "v1.4"},
		{"v1.3.2", "v1.2.9-rc.1", "v1.4"},
		{"v1.3.2", "v1.3.0", ""},
		{"v1.3.2", "v1.4.0", ""},
		{"v1.3.2", "v1.1.9", ""}, // refused already
		{"v2.0.0", "v1.7.0", "v2.1"},
		{"v2.0.0", "v2.0.0", ""},
		{"dev", "v1.2.0", ""},
		{"v1.3.2", "dev", ""},
	} {
		got, ok := RefusedFrom(tc.manager, tc.delegate)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("RefusedFrom(%s, %s) = %q, %v; want %q", tc.manager, tc.delegate, got, ok, tc.want)
		}
	}
}
