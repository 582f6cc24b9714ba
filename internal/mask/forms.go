package mask

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MinEncodedLen is the shortest encoded form that is masked. A secret
// itself is masked however short it is (the caller chose it), but an
// encoded form of a very short secret, such as the two base64 characters
// that depend only on a two-byte secret, would hide unrelated text all
// over the output.
const MinEncodedLen = 4

// forms returns the strings masked for one secret: the secret, then its
// distinct encoded forms at least MinEncodedLen long, none repeated.
//
// The encoded forms are:
//
//   - base64, standard and URL alphabets: for each of the three byte
//     offsets at which the secret can start inside encoded data (after 0, 1
//     or 2 bytes, mod 3), the characters that depend only on the secret's
//     bytes (the stable core), and the core completed up to the end of the
//     data, unpadded and padded, for a secret that ends it, as in
//     base64("user:" + secret) of HTTP Basic auth. At offset 0 the
//     completed forms are the plain encodings of the secret. The one
//     character at each end of the core that mixes the secret's bits with
//     those of its neighbours is not masked: it differs with every
//     neighbour, and shows at most 4 bits of the secret.
//   - JSON string contents: what encoding/json writes (with and without
//     HTML escaping: \u003c, \u003e, \u0026), the minimal escaping of
//     JavaScript's JSON.stringify and most encoders (only '"', '\\' and
//     control characters), and the ASCII-only escaping of Python's
//     json.dumps and jq -a (\uXXXX for everything outside printable
//     ASCII); each also with upper-case hex digits (\u003C, as .NET and
//     Java encoders write).
//   - percent-encoding: url.QueryEscape (space as '+'), url.PathEscape,
//     and the strict RFC 3986 form of curl --data-urlencode and
//     encodeURIComponent (everything but letters, digits and "-._~"
//     escaped), each with upper- and lower-case hex digits.
func forms(secret string) []string {
	if secret == "" {
		return nil
	}
	out := []string{secret}
	seen := map[string]bool{secret: true}
	add := func(f string) {
		if len(f) >= MinEncodedLen && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, f := range base64Forms([]byte(secret)) {
		add(f)
	}
	for _, f := range jsonForms(secret) {
		add(f)
		add(upperUnicodeHex(f))
	}
	for _, f := range urlForms(secret) {
		add(f)
		add(lowerPercentHex(f))
	}
	return out
}

// base64Forms returns the base64 forms of s described at forms, with
// repetitions.
func base64Forms(s []byte) []string {
	var out []string
	buf := make([]byte, 2+len(s))
	for k := 0; k < 3; k++ {
		// s after k zero bytes: the characters from first on do not depend
		// on those bytes; up to stable they do not depend on what follows
		// s either (character j covers bits 6j to 6j+6 of the data).
		data := buf[:k+len(s)]
		clear(data[:k])
		copy(data[k:], s)
		first := (8*k + 5) / 6
		stable := 8 * (k + len(s)) / 6
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			padded := e.EncodeToString(data)
			raw := strings.TrimRight(padded, "=")
			if stable > first {
				out = append(out, raw[first:stable])
			}
			if len(raw) > first {
				out = append(out, raw[first:], padded[first:])
			}
		}
	}
	return out
}

// jsonForms returns the contents of the JSON strings that encoders write
// for s, without the quotes.
func jsonForms(s string) []string {
	b, _ := json.Marshal(s) // a string always marshals
	html := string(b[1 : len(b)-1])
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	p := strings.TrimSuffix(plain.String(), "\n")
	return []string{html, p[1 : len(p)-1], jsonEscape(s, false), jsonEscape(s, true)}
}

// jsonEscape escapes '"', '\\' and control characters the way most JSON
// encoders do (the short escapes \b \f \n \r \t, else \u00XX), and, when
// ascii is set, every rune outside printable ASCII as \uXXXX (a UTF-16
// surrogate pair above U+FFFF). Invalid UTF-8 becomes U+FFFD, as in every
// encoder that accepts it.
func jsonEscape(s string, ascii bool) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	u4 := func(r rune) {
		b.WriteString(`\u`)
		for sh := 12; sh >= 0; sh -= 4 {
			b.WriteByte(hex[(r>>sh)&0xf])
		}
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			u4(r)
		case !ascii || (r < utf8.RuneSelf && r != 0x7f):
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			u4(r1)
			u4(r2)
		default:
			u4(r)
		}
	}
	return b.String()
}

// upperUnicodeHex rewrites the hex digits of every \uXXXX escape of a
// string jsonEscape or encoding/json wrote in upper case.
func upperUnicodeHex(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	b := []byte(s)
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			for j := i + 2; j < i+6; j++ {
				if b[j] >= 'a' && b[j] <= 'f' {
					b[j] -= 'a' - 'A'
				}
			}
			i += 5
			continue
		}
		i++ // a two-character escape such as \\
	}
	return string(b)
}

// urlForms returns the percent-encodings of s described at forms, with
// upper-case hex digits.
func urlForms(s string) []string {
	return []string{url.QueryEscape(s), url.PathEscape(s), strictEscape(s)}
}

// strictEscape percent-encodes every byte of s but the unreserved
// characters of RFC 3986 (letters, digits, "-._~").
func strictEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// lowerPercentHex rewrites the hex digits of every %XX escape in lower case.
func lowerPercentHex(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}
