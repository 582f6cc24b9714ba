// Package seal encrypts values at rest: AES-256-GCM under a key ring kept
// outside the database (a key file or LEGATE_MASTER_KEY), so that a copy of
// the database alone reveals no secret.
//
// A sealed value is text: "v1:<key id>:<base64url(nonce || ciphertext)>".
// The key ID names the ring key that sealed it; the caller's context (for
// example "task/T/secret_env") is authenticated with it, so a sealed value
// copied to another row does not open there. A ring has one primary key,
// which seals, and older keys, which only open: that is how a rotation
// re-seals values without a moment where some cannot be read.
//
// The package is standard library only and holds no state: a Ring is
// immutable and safe for concurrent use.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// KeySize is the size of a master key in bytes.
const KeySize = 32

// version is the format of sealed values this package writes and reads.
const version = "v1"

// idLen is the length of a key ID in hex digits.
const idLen = 12

// maxSealed bounds the sealed values Open decodes (64 MiB of text), so a
// damaged row cannot make it allocate without limit.
const maxSealed = 64 << 20

var (
	// ErrMalformed reports a value that is not a sealed value of this
	// format at all.
	ErrMalformed = errors.New("not a sealed value")
	// ErrAuth reports a sealed value that does not authenticate: it was
	// altered, or it was sealed for another row (context).
	ErrAuth = errors.New("sealed value does not authenticate: it was altered, or it was moved from another row")
)

// UnknownKeyError reports a value sealed with a key the ring lacks.
type UnknownKeyError struct {
	// ID is the key that sealed the value; Have are the ring's keys.
	ID   string
	Have []string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("sealed with key %s, which is not among this ring's keys (%s)", e.ID, strings.Join(e.Have, ", "))
}

// key is one key of a ring.
type key struct {
	id   string
	raw  []byte // the master key, for writing key files; never logged
	aead cipher.AEAD
}

func newKey(raw []byte) (key, error) {
	if len(raw) != KeySize {
		return key{}, fmt.Errorf("a key must be %d bytes, not %d", KeySize, len(raw))
	}
	enc, err := hkdf.Key(sha256.New, raw, nil, "legate seal v1 aes-256-gcm", 32)
	if err != nil {
		return key{}, err
	}
	block, err := aes.NewCipher(enc)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	return key{id: KeyID(raw), raw: slices.Clone(raw), aead: aead}, nil
}

// KeyID is the public name of a master key: 12 hex digits derived from the
// key (HKDF-SHA256), the same for every manager that holds the key, and
// revealing nothing useful about it.
func KeyID(raw []byte) string {
	b, err := hkdf.Key(sha256.New, raw, nil, "legate seal v1 key id", idLen/2)
	if err != nil { // only for absurd lengths
		panic(err)
	}
	return hex.EncodeToString(b)
}

// NewKey returns a new random master key.
func NewKey() []byte {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// Ring is a primary key, which seals, and older keys, which only open.
type Ring struct {
	keys []key // keys[0] is the primary
}

// NewRing makes a ring of master keys (KeySize bytes each): the first is
// the primary, the others only open. A key given twice is kept once.
func NewRing(primary []byte, older ...[]byte) (*Ring, error) {
	r := &Ring{}
	for i, raw := range append([][]byte{primary}, older...) {
		k, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if r.has(k.id) {
			continue
		}
		r.keys = append(r.keys, k)
	}
	return r, nil
}

// Primary is the ID of the key that seals.
func (r *Ring) Primary() string { return r.keys[0].id }

// IDs lists the ring's key IDs, the primary first.
func (r *Ring) IDs() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.id
	}
	return out
}

func (r *Ring) has(id string) bool { return r.find(id) != nil }

// Has reports whether the ring holds the key with this ID.
func (r *Ring) Has(id string) bool { return r.has(id) }

func (r *Ring) find(id string) *key {
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

// Rotated returns a ring whose primary is newPrimary and whose other keys
// are all of r's (they keep opening what they sealed).
func (r *Ring) Rotated(newPrimary []byte) (*Ring, error) {
	raws := make([][]byte, 0, len(r.keys))
	for _, k := range r.keys {
		raws = append(raws, k.raw)
	}
	return NewRing(newPrimary, raws...)
}

// PrimaryOnly returns a ring of r's primary key alone.
func (r *Ring) PrimaryOnly() *Ring { return &Ring{keys: r.keys[:1:1]} }

// additionalData binds a sealed value to its format, its key and the
// caller's context.
func additionalData(id, context string) []byte {
	return []byte(version + ":" + id + ":" + context)
}

// Seal encrypts plaintext under the primary key, for context (which Open
// must be given again).
func (r *Ring) Seal(plaintext []byte, context string) string {
	k := &r.keys[0]
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	box := k.aead.Seal(nonce, nonce, plaintext, additionalData(k.id, context))
	return version + ":" + k.id + ":" + base64.RawURLEncoding.EncodeToString(box)
}

// Open decrypts a sealed value for context. It fails with ErrMalformed
// (not a sealed value), *UnknownKeyError (sealed with a key the ring
// lacks) or ErrAuth (altered, cut, or sealed for another context).
func (r *Ring) Open(sealed, context string) ([]byte, error) {
	id, body, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	k := r.find(id)
	if k == nil {
		return nil, &UnknownKeyError{ID: id, Have: r.IDs()}
	}
	box, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(box) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, ErrAuth // a header, and a body damaged or cut
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, box[:n], box[n:], additionalData(id, context))
	if err != nil {
		return nil, ErrAuth
	}
	return plain, nil
}

// IsSealed reports whether v has the form of a sealed value (it may still
// fail to open).
func IsSealed(v string) bool { return strings.HasPrefix(v, version+":") }

// SealedKeyID returns the ID of the key that sealed v; ErrMalformed if v is
// not a sealed value.
func SealedKeyID(v string) (string, error) {
	id, _, err := parse(v)
	return id, err
}

// Prefix is the start of every value sealed with the key id: a store can
// find the values sealed with other keys without decoding any.
func Prefix(id string) string { return version + ":" + id + ":" }

func parse(v string) (id, body string, err error) {
	if len(v) > maxSealed {
		return "", "", ErrMalformed
	}
	rest, ok := strings.CutPrefix(v, version+":")
	if !ok {
		return "", "", ErrMalformed
	}
	id, body, ok = strings.Cut(rest, ":")
	if !ok || !validID(id) || body == "" {
		return "", "", ErrMalformed
	}
	return id, body, nil
}

func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
