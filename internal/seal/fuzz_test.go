package seal

import (
	"errors"
	"testing"
)

// FuzzOpen feeds arbitrary text to the sealed-value decoder: it never
// panics, it opens only what this ring sealed for this context, and what
// it opens is what was sealed.
func FuzzOpen(f *testing.F) {
	r := mustRing(f, testKey(1), testKey(2))
	sealed := r.Seal([]byte("s3cret"), "ctx")
	f.Add(sealed, "ctx")
	f.Add(sealed, "other")
	f.Add(sealed[:len(sealed)-1], "ctx")
	f.Add("v1:"+r.Primary()+":", "ctx")
	f.Add("v1:::", "")
	f.Add("plaintext", "ctx")
	f.Fuzz(func(t *testing.T, value, context string) {
		plain, err := r.Open(value, context)
		var uk *UnknownKeyError
		switch {
		case err == nil:
			// Forging a value that authenticates is infeasible: only a seed
			// sealed above (in this process or the one that made the
			// corpus) opens, to what was sealed, for its context.
			if context != "ctx" || string(plain) != "s3cret" {
				t.Fatalf("Open(%q, %q) = %q without error", value, context, plain)
			}
		case errors.Is(err, ErrMalformed), errors.Is(err, ErrAuth), errors.As(err, &uk):
			if IsSealed(value) == false && !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open(%q): %v for a value without the header", value, err)
			}
		default:
			t.Fatalf("Open(%q): unexpected error %v", value, err)
		}
		// Whatever opens or not, sealing the text round-trips.
		back, err := r.Open(r.Seal([]byte(value), context), context)
		if err != nil || string(back) != value {
			t.Fatalf("round trip of %q: %q, %v", value, back, err)
		}
	})
}

// FuzzParseKeyFile feeds arbitrary files to the key file parser: it never
// panics, and a ring it accepts survives FormatKeyFile.
func FuzzParseKeyFile(f *testing.F) {
	f.Add(string(FormatKeyFile(mustRing(f, testKey(1), testKey(2)))))
	f.Add("# comment\n" + EncodeKey(testKey(3)) + "\n")
	f.Add("abc def\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseKeyFile([]byte(text))
		if err != nil {
			return
		}
		back, err := ParseKeyFile(FormatKeyFile(r))
		if err != nil {
			t.Fatalf("the formatted ring does not parse: %v", err)
		}
		if len(back.IDs()) != len(r.IDs()) || back.Primary() != r.Primary() {
			t.Fatalf("round trip changed the ring: %v -> %v", r.IDs(), back.IDs())
		}
		// LEGATE_MASTER_KEY takes the same keys.
		if _, err := ParseEnv(text); err == nil && len(text) > 0 && text[0] == '#' {
			t.Fatalf("ParseEnv accepted a comment line")
		}
	})
}
