package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// A session credential is "s1.<payload>.<mac>": the payload (base64url JSON)
// says which instance of which account, registered with which token and at
// which generation, until when; the MAC is HMAC-SHA256 under a key kept in
// the store, so every manager sharing the store accepts it and a restart
// does not log delegates out. The raw delegate token is never sent again.
type sessionClaims struct {
	InstanceID string `json:"i"`
	AccountID  string `json:"a"`
	TokenID    string `json:"t"`
	Generation int64  `json:"g"`
	Expires    int64  `json:"e"` // Unix seconds
}

var errSessionExpired = errors.New("session expired")
var errSessionInvalid = errors.New("invalid session")

func signSession(key []byte, c sessionClaims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(p))
	return "s1." + p + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func verifySession(key []byte, s string, now time.Time) (sessionClaims, error) {
	var c sessionClaims
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] != "s1" {
		return c, errSessionInvalid
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return c, errSessionInvalid
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return c, errSessionInvalid
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, errSessionInvalid
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.InstanceID == "" || c.AccountID == "" {
		return c, errSessionInvalid
	}
	if now.Unix() >= c.Expires {
		return c, errSessionExpired
	}
	return c, nil
}
