package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// FuzzParseSignature: any header gives 32 bytes or an error, and a valid
// signature parses back to its sum.
func FuzzParseSignature(f *testing.F) {
	for _, s := range []string{"", "sha256=", "sha1=ab", sign("k", []byte("body")), "sha256=" + strings.Repeat("A", 64), "sha256=" + strings.Repeat("g", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sum, err := parseSignature(v)
		if err != nil {
			if !strings.Contains(err.Error(), protocol.HeaderHubSignature256) {
				t.Fatalf("error %q does not name the header", err)
			}
			return
		}
		if len(sum) != sha256.Size {
			t.Fatalf("%q gave %d bytes", v, len(sum))
		}
		if !strings.EqualFold(v, "sha256="+hex.EncodeToString(sum)) {
			t.Fatalf("%q parsed to %x", v, sum)
		}
		if signatureOK([]byte("k"), []byte("body"), sum) != (strings.ToLower(v) == sign("k", []byte("body"))) {
			t.Fatalf("signatureOK disagrees with HMAC for %q", v)
		}
	})
}
