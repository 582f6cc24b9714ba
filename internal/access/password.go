package access

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (RFC 9106), the memory-hard hash
// that won the Password Hashing Competition, with the parameters OWASP
// recommends as a minimum: 19 MiB of memory, 2 passes, 1 lane, so that a
// guess costs an attacker real memory and time. It is preferred to bcrypt
// here because it cannot be computed cheaply on GPUs and has no 72-byte
// input limit.
// Hashes are stored in the PHC string format, which carries the
// parameters, so they can be raised later without invalidating old
// hashes.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// MaxPasswordLen bounds what is hashed (a longer password is refused, so
// a request cannot make the manager hash megabytes).
const MaxPasswordLen = 1024

// MinPasswordLen is the shortest password accepted.
const MinPasswordLen = 8

// CheckPassword says what is wrong with a new password, or nil.
func CheckPassword(pw string) error {
	switch {
	case len(pw) < MinPasswordLen:
		return fmt.Errorf("the password is too short: use at least %d characters", MinPasswordLen)
	case len(pw) > MaxPasswordLen:
		return fmt.Errorf("the password is too long: at most %d bytes", MaxPasswordLen)
	}
	return nil
}

// HashPassword returns the argon2id hash of pw in PHC format.
func HashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// phc is a parsed argon2id hash.
type phc struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

var errHashFormat = errors.New("not an argon2id hash in PHC format")

// parsePHC reads "$argon2id$v=19$m=M,t=T,p=P$SALT$KEY" with bounds on
// every parameter, so a corrupt or hostile stored hash cannot make
// verification take unbounded memory or time.
func parsePHC(s string) (phc, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return phc{}, errHashFormat
	}
	var h phc
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil {
			return phc{}, errHashFormat
		}
		switch k {
		case "m":
			h.memory = uint32(n)
		case "t":
			h.time = uint32(n)
		case "p":
			if n > 255 {
				return phc{}, errHashFormat
			}
			h.threads = uint8(n)
		default:
			return phc{}, errHashFormat
		}
	}
	if h.memory < 8 || h.memory > 1<<20 || h.time < 1 || h.time > 16 || h.threads < 1 || h.threads > 16 {
		return phc{}, errHashFormat
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(h.salt) < 8 || len(h.salt) > 64 {
		return phc{}, errHashFormat
	}
	if h.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return phc{}, errHashFormat
	}
	return h, nil
}

// VerifyPassword reports whether pw matches hash (in constant time). A
// hash that does not parse (an empty one: no password set) matches
// nothing.
func VerifyPassword(hash, pw string) bool {
	h, err := parsePHC(hash)
	if err != nil || len(pw) > MaxPasswordLen {
		return false
	}
	key := argon2.IDKey([]byte(pw), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(key, h.key) == 1
}
