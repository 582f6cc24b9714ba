package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

func sign(secret, ts, id string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + id + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// FuzzParseDelivery: any headers give a delivery whose parts are what the
// headers say, or an error naming a header; a valid signature parses back
// to its sum and signatureOK agrees with HMAC.
func FuzzParseDelivery(f *testing.F) {
	good := sign("k", "1700000000", "d-1", []byte("body"))
	f.Add("1700000000", "d-1", good, "")
	f.Add("", "d-1", good, "")
	f.Add("1700000000", "", good, "")
	f.Add("17e8", "d-1", good, "")
	f.Add("1700000000", "d.1", good, "")
	f.Add("99999999999999999999", "d-1", good, "")
	f.Add("1700000000", "d-1", "", "sha256="+strings.Repeat("a", 64))
	f.Add("1700000000", "d-1", "sha1=ab", "")
	f.Add("1700000000", "d-1", "sha256="+strings.Repeat("g", 64), "")
	f.Fuzz(func(t *testing.T, ts, id, sig, hub string) {
		h := http.Header{}
		for k, v := range map[string]string{protocol.HeaderLegateTimestamp: ts, protocol.HeaderLegateDelivery: id,
			protocol.HeaderLegateSignature256: sig, protocol.HeaderHubSignature256: hub} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		d, err := parseDelivery(h)
		if err != nil {
			if !strings.Contains(err.Error(), "X-") {
				t.Fatalf("error %q names no header", err)
			}
			return
		}
		if len(d.sum) != sha256.Size || d.ts != ts || d.id != id || strconv.FormatInt(d.at.Unix(), 10) != strings.TrimLeft(ts, "0") && d.at.Unix() != 0 {
			t.Fatalf("%q %q %q parsed to %+v", ts, id, sig, d)
		}
		if id == "" || strings.ContainsAny(id, ".\n ") || len(id) > maxDeliveryLen {
			t.Fatalf("delivery ID %q accepted", id)
		}
		if !strings.EqualFold(sig, "sha256="+hex.EncodeToString(d.sum)) {
			t.Fatalf("%q parsed to %x", sig, d.sum)
		}
		if signatureOK([]byte("k"), d, []byte("body")) != (strings.ToLower(sig) == sign("k", ts, id, []byte("body"))) {
			t.Fatalf("signatureOK disagrees with HMAC for %q %q %q", ts, id, sig)
		}
	})
}
