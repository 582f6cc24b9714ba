package mask

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

const R = Replacement

func TestString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"no secrets", "hello", nil, "hello"},
		{"empty secret ignored", "hello", []string{""}, "hello"},
		{"empty input", "", []string{"s3cr3t"}, ""},
		{"whole", "s3cr3t", []string{"s3cr3t"}, R},
		{"middle", "pw=s3cr3t;", []string{"s3cr3t"}, "pw=" + R + ";"},
		{"twice", "s3cr3t and s3cr3t", []string{"s3cr3t"}, R + " and " + R},
		{"adjacent occurrences", "abcabc", []string{"abc"}, R + R},
		{"almost", "s3cr3 s3cr3x", []string{"s3cr3t"}, "s3cr3 s3cr3x"},
		{"two secrets", "user=bob pass=hunter2", []string{"bob", "hunter2"}, "user=" + R + " pass=" + R},
		{"longest wins (prefix)", "xabcdefx", []string{"abc", "abcdef"}, "x" + R + "x"},
		{"longest wins, order independent", "xabcdefx", []string{"abcdef", "abc"}, "x" + R + "x"},
		{"shorter at end", "xabcx", []string{"abc", "abcdef"}, "x" + R + "x"},
		{"overlap merged", "xabcdex", []string{"abc", "cde"}, "x" + R + "x"},
		{"contained", "xabcdex", []string{"abcde", "bcd"}, "x" + R + "x"},
		{"self overlap", "aaaaa", []string{"aa"}, R},
		{"self overlap odd", "xaaax", []string{"aa"}, "x" + R + "x"},
		{"base64 std padded", "tok aHVudGVyMg== end", []string{"hunter2"}, "tok " + R + " end"},
		{"base64 unpadded", "tok aHVudGVyMg end", []string{"hunter2"}, "tok " + R + " end"},
		{"base64 std alphabet", "YWI/Pg==", []string{"ab?>"}, R},
		{"base64 url alphabet", "YWI_Pg==", []string{"ab?>"}, R},
		{"base64 url unpadded", "[YWI_Pg]", []string{"ab?>"}, "[" + R + "]"},
		{"secret with newline", "a\nline1\nline2\nb", []string{"line1\nline2"}, "a\n" + R + "\nb"},
		{"binary secret", "\x00\xff\x00", []string{"\xff"}, "\x00" + R + "\x00"},
		{"unicode", "héllo wörld", []string{"wörld"}, "héllo " + R},
		{"replacement-like secret", "a*b", []string{"*"}, "a" + R + "b"},
		// base64 at the other byte offsets, and followed by other data.
		{"basic auth", "Authorization: Basic dXNlcjpodW50ZXIy\n", []string{"hunter2"}, "Authorization: Basic dXNlcjp" + R + "\n"},
		{"base64 offset 1", "eGh1bnRlcjI=", []string{"hunter2"}, "eG" + R},
		{"base64 offset 2", "eDpodW50ZXIy", []string{"hunter2"}, "eDp" + R},
		{"base64 followed by data", "aHVudGVyMjt4", []string{"hunter2"}, R + "jt4"},
		{"base64 offset 1 url alphabet", "eP_vvw", []string{"\xff\xef\xbf"}, "eP" + R},
		{"short encoded forms are not masked", "YQ YWI= YWJj a", []string{"a"}, "YQ YWI= YWJj " + R},
		// JSON string contents.
		{"json html escapes", `{"pw":"a\u003cb\u003e\u0026c"}`, []string{"a<b>&c"}, `{"pw":"` + R + `"}`},
		{"json html escapes upper-case", `{"pw":"a\u003Cb\u003E\u0026c"}`, []string{"a<b>&c"}, `{"pw":"` + R + `"}`},
		{"json quotes and backslashes", `{"pw":"say \"hi\" \\o/"}`, []string{`say "hi" \o/`}, `{"pw":"` + R + `"}`},
		{"json control characters", `{"pw":"a\tb\u0001c\nd"}`, []string{"a\tb\x01c\nd"}, `{"pw":"` + R + `"}`},
		{"json ascii-only", `{"pw":"w\u00f6rld \ud83d\ude00"}`, []string{"wörld 😀"}, `{"pw":"` + R + `"}`},
		{"json line separator", `"a\u2028b"`, []string{"a\u2028b"}, `"` + R + `"`},
		// Percent-encoding.
		{"query escape", "?pw=p%40ss+w%2Frd%26x&y=1", []string{"p@ss w/rd&x"}, "?pw=" + R + "&y=1"},
		{"path escape", "/u/p@ss%20w%2Frd&x/", []string{"p@ss w/rd&x"}, "/u/" + R + "/"},
		{"strict escape", "p%40ss%20w%2Frd%26x", []string{"p@ss w/rd&x"}, R},
		{"lower-case hex", "?pw=p%40ss+w%2frd%26x", []string{"p@ss w/rd&x"}, "?pw=" + R},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := String(tt.in, tt.secrets)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("String(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if ref := reference(tt.in, tt.secrets); ref != got {
				t.Errorf("String(%q) = %q, reference = %q", tt.in, got, ref)
			}
			if s := streamed(t, tt.in, tt.secrets, []int{1}); s != got {
				t.Errorf("byte-by-byte Writer = %q, String = %q", s, got)
			}
		})
	}
}

// TestBase64Forms checks each of the four base64 forms on its own, for
// secret lengths that need 0, 1 and 2 padding characters.
func TestBase64Forms(t *testing.T) {
	t.Parallel()
	encs := map[string]*base64.Encoding{
		"std": base64.StdEncoding, "rawstd": base64.RawStdEncoding,
		"url": base64.URLEncoding, "rawurl": base64.RawURLEncoding,
	}
	for _, secret := range []string{"\xfb\xff\xbf", "\xfb\xff\xbf\xfe", "\xfb\xff\xbf\xfe\xfd"} {
		for name, e := range encs {
			enc := e.EncodeToString([]byte(secret))
			in := "<" + enc + ">"
			if got, want := String(in, []string{secret}), "<"+R+">"; got != want {
				t.Errorf("%s form %q of %q: got %q, want %q", name, enc, secret, got, want)
			}
		}
	}
}

// TestFormsMatchReference compares the masked forms of each secret with
// those the test computes independently (referenceForms).
func TestFormsMatchReference(t *testing.T) {
	t.Parallel()
	secrets := []string{
		"a", "ab", "abc", "abcd", "hunter2", "s3cr3t-value", "\xff", "\xff\xef\xbf", "\xff\xfe", "\x00\x01\x02\x03",
		`p"a\ss<w>&rd`, "tab\tnew\nline\r\b\f\x01\x1f\x7f", "wörld", "😀 emoji", "a\u2028b\u2029", "bad\xffutf8\xc3",
		"p@ss w/rd&x?y=z#f%20+", "~-._", strings.Repeat("x", 100),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		secrets = append(secrets, randomSecret(rng, 1+rng.IntN(24)))
	}
	for _, s := range secrets {
		got, want := forms(s), referenceForms(s)
		if got[0] != s {
			t.Errorf("forms(%q)[0] = %q, want the secret itself first", s, got[0])
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("forms(%q) mismatch (-reference +forms):\n%s", s, diff)
		}
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("forms(%q) repeats a form: %q", s, got)
		}
	}
}

// randomSecret returns n random bytes, mostly printable, with some of the
// characters that encoders escape and some non-ASCII.
func randomSecret(rng *rand.Rand, n int) string {
	const special = "\"\\<>&/?=+%:@ \t\n\x01\x7f"
	var b []byte
	for len(b) < n {
		switch rng.IntN(10) {
		case 0:
			b = append(b, special[rng.IntN(len(special))])
		case 1:
			b = utf8.AppendRune(b, []rune("é€😀\u2028")[rng.IntN(4)])
		case 2:
			b = append(b, byte(rng.Uint32()))
		default:
			b = append(b, byte('!'+rng.IntN('~'-'!'+1)))
		}
	}
	return string(b)
}

// TestEncodedSecretsDoNotLeak encodes random secrets the way programs leak
// them (HTTP Basic auth, base64 of a file or of echo's output, JSON
// documents, URLs), in random surroundings, and checks that the masked
// output shows nothing of the secret but the mixed base64 characters at
// its ends.
func TestEncodedSecretsDoNotLeak(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	letters := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	for iter := range 2000 {
		secret := randomSecret(rng, 8+rng.IntN(40))
		user := letters(rng.IntN(9))
		after := letters(1 + rng.IntN(5)) // letters: the mixed character differs from the padded one
		var in, want string
		switch iter % 9 {
		case 0, 1, 2: // base64 of user:secret, of secret+data, standard or URL alphabet
			e := base64.StdEncoding
			if iter%2 == 1 {
				e = base64.RawURLEncoding
			}
			pre, post := user+":", ""
			if iter%9 == 1 {
				post = after
			}
			enc := e.EncodeToString([]byte(pre + secret + post))
			first := (8*len(pre) + 5) / 6
			last := len(enc)
			if post != "" {
				last = 8 * (len(pre) + len(secret)) / 6
			}
			in = "Authorization: Basic " + enc + "\n"
			want = "Authorization: Basic " + enc[:first] + R + enc[last:] + "\n"
		case 3: // json.Marshal
			b, _ := json.Marshal(map[string]string{"password": secret})
			in, want = string(b), `{"password":"`+R+`"}`
		case 4: // a JSON encoder without HTML escaping
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode([]string{secret})
			in, want = buf.String(), `["`+R+`"]`+"\n"
		case 5: // ASCII-only JSON with upper-case hex (.NET, Python's ensure_ascii plus upper case)
			in = `{"password":"` + referenceJSON(secret, false, false, true, "%04X") + `"}`
			want = `{"password":"` + R + `"}`
		case 6:
			in = "https://api.example.com/v1?user=" + user + "&token=" + url.QueryEscape(secret) + "&x=1"
			want = "https://api.example.com/v1?user=" + user + "&token=" + R + "&x=1"
		case 7:
			in = "https://api.example.com/keys/" + url.PathEscape(secret) + "/x"
			want = "https://api.example.com/keys/" + R + "/x"
		case 8:
			in = "data=" + regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(referenceStrict(secret), strings.ToLower) + "&y"
			want = "data=" + R + "&y"
		}
		if got := String(in, []string{secret}); got != want {
			t.Fatalf("case %d, secret %q:\n  in   %q\n  got  %q\n  want %q", iter%9, secret, in, got, want)
		}
	}
}

func TestWriterLive(t *testing.T) {
	t.Parallel()
	var dst bytes.Buffer
	w := New(&dst, []string{"s3cr3t"})
	write := func(s string) {
		t.Helper()
		n, err := w.Write([]byte(s))
		if err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	write("line one\n")
	if got := dst.String(); got != "line one\n" {
		t.Fatalf("a full line must flow at once; got %q", got)
	}
	write("pw=s3c")
	if got := dst.String(); got != "line one\npw=" {
		t.Fatalf("only the possible secret start may be held; got %q", got)
	}
	write("r")
	write("3t done\n")
	if got, want := dst.String(), "line one\npw="+R+" done\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	write("tail s3cr")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.String(), "line one\npw="+R+" done\ntail s3cr"; got != want {
		t.Fatalf("after Flush got %q, want %q", got, want)
	}
	if err := w.Flush(); err != nil { // idempotent
		t.Fatal(err)
	}
	if got, want := dst.String(), "line one\npw="+R+" done\ntail s3cr"; got != want {
		t.Fatalf("second Flush changed output: %q", got)
	}
}

// TestWriterLongestWaits checks that a short match is not replaced early
// when a longer secret could still follow, and that the replacement is
// emitted once.
func TestWriterLongestWaits(t *testing.T) {
	t.Parallel()
	var dst bytes.Buffer
	w := New(&dst, []string{"abc", "abcdef"})
	for _, s := range []string{"x", "abc", "de", "f", "y"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.String(), "x"+R+"y"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestWriterNoSecrets(t *testing.T) {
	t.Parallel()
	var dst bytes.Buffer
	w := New(&dst, []string{"", ""})
	if _, err := w.Write([]byte("plain")); err != nil {
		t.Fatal(err)
	}
	if dst.String() != "plain" {
		t.Fatalf("got %q", dst.String())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{}

var errBoom = errors.New("boom")

func (failWriter) Write([]byte) (int, error) { return 0, errBoom }

func TestWriterError(t *testing.T) {
	t.Parallel()
	w := New(failWriter{}, []string{"secret"})
	if n, err := w.Write([]byte("hello")); !errors.Is(err, errBoom) || n != 0 {
		t.Fatalf("Write = %d, %v; want 0, boom", n, err)
	}
	if _, err := w.Write([]byte("sec")); err != nil { // held back: nothing written
		t.Fatalf("Write = %v", err)
	}
	if err := w.Flush(); !errors.Is(err, errBoom) {
		t.Fatalf("Flush = %v; want boom", err)
	}
}

// TestSplitEverywhere streams inputs split at every position (into two and
// three pieces) and compares with String.
func TestSplitEverywhere(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		secrets []string
	}{
		{"token=s3cr3t; again s3cr3t!", []string{"s3cr3t"}},
		{"xabcdefx abc abcde abcdef", []string{"abc", "abcdef"}},
		{"xabcdex cde abcd", []string{"abc", "cde"}},
		{"aaaaaaa b aa a", []string{"aa", "aaa"}},
		{"b64 aHVudGVyMg== aHVudGVyMg hunter2 aHVudGVy", []string{"hunter2"}},
		{"ab?> YWI/Pg== YWI_Pg YWI_Pg==", []string{"ab?>"}},
	}
	for _, c := range cases {
		want := String(c.in, c.secrets)
		for i := 0; i <= len(c.in); i++ {
			for j := i; j <= len(c.in); j++ {
				got := streamedParts(t, c.secrets, c.in[:i], c.in[i:j], c.in[j:])
				if got != want {
					t.Fatalf("%q split at %d,%d: got %q, want %q", c.in, i, j, got, want)
				}
			}
		}
	}
}

// TestRandomChunking compares random inputs over a small alphabet (so that
// secrets overlap a lot) in random chunkings with String and with a
// brute-force reference.
func TestRandomChunking(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abc"
	randStr := func(maxLen int) string {
		n := rng.IntN(maxLen + 1)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for iter := 0; iter < 3000; iter++ {
		secrets := make([]string, rng.IntN(4))
		for i := range secrets {
			secrets[i] = randStr(4)
		}
		in := randStr(40)
		want := String(in, secrets)
		if ref := reference(in, secrets); ref != want {
			t.Fatalf("String(%q, %q) = %q; reference %q", in, secrets, want, ref)
		}
		var sizes []int
		for range 4 {
			sizes = append(sizes, 1+rng.IntN(6))
		}
		if got := streamed(t, in, secrets, sizes); got != want {
			t.Fatalf("secrets %q input %q chunks %v: streamed %q, String %q", secrets, in, sizes, got, want)
		}
		assertNoLeak(t, want, secrets)
	}
}

// TestRandomChunkingEncoded is TestRandomChunking with inputs made of
// pieces of the secrets' encoded forms (whole, cut, overlapping) and random
// bytes, compared with the reference masker.
func TestRandomChunkingEncoded(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	for iter := 0; iter < 2000; iter++ {
		secrets := make([]string, 1+rng.IntN(3))
		var fs []string
		for i := range secrets {
			secrets[i] = randomSecret(rng, 1+rng.IntN(8))
			fs = append(fs, referenceForms(secrets[i])...)
		}
		var in strings.Builder
		for range rng.IntN(8) {
			f := fs[rng.IntN(len(fs))]
			switch rng.IntN(4) {
			case 0:
				f = f[:rng.IntN(len(f)+1)]
			case 1:
				f = f[rng.IntN(len(f)+1):]
			case 2:
				f = randomSecret(rng, rng.IntN(4))
			}
			in.WriteString(f)
		}
		want := String(in.String(), secrets)
		if ref := reference(in.String(), secrets); ref != want {
			t.Fatalf("String(%q, %q) = %q; reference %q", in.String(), secrets, want, ref)
		}
		sizes := []int{1 + rng.IntN(7), 1 + rng.IntN(3), 1 + rng.IntN(20)}
		if got := streamed(t, in.String(), secrets, sizes); got != want {
			t.Fatalf("secrets %q input %q chunks %v: streamed %q, String %q", secrets, in.String(), sizes, got, want)
		}
		assertNoLeak(t, want, secrets)
	}
}

func TestLargeOutput(t *testing.T) {
	t.Parallel()
	secret := "correct-horse-battery-staple"
	line := "log line with some text and numbers 0123456789 and a partial corr\n"
	var in strings.Builder
	for in.Len() < 4<<20 {
		in.WriteString(line)
		if in.Len()%7 == 0 {
			in.WriteString(secret)
		}
	}
	want := String(in.String(), []string{secret})
	got := streamed(t, in.String(), []string{secret}, []int{32 << 10, 1000, 4097})
	if got != want {
		t.Fatal("streamed output differs from String for large input")
	}
	if strings.Contains(got, secret) {
		t.Fatal("secret leaked")
	}
}

// BenchmarkWriter measures masking throughput with the secrets a task
// typically has (a delegate token, a password, an API key) over three
// kinds of output: log text, base64 data (where every character can start
// a base64 form) and JSON lines.
func BenchmarkWriter(b *testing.B) {
	secrets := []string{"dlg_7f3a9c2e5b1d4f60a8e2c9b7d1f3e5a7", "correct horse battery staple!", "AKIAIOSFODNN7EXAMPLE"}
	line := "2026-01-02T03:04:05Z INFO a typical log line, with words, numbers 12345, and some punctuation!\n"
	raw := make([]byte, 48<<10)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	var lines strings.Builder
	for i := 0; lines.Len() < 64<<10; i++ {
		fmt.Fprintf(&lines, `{"level":"info","ts":%d,"msg":"request done","path":"/api/v1/items?id=%d&q=a%%20b","status":200}`+"\n", 1700000000+i, i)
	}
	for _, in := range []struct {
		name  string
		chunk []byte
	}{
		{"text", bytes.Repeat([]byte(line), 64<<10/len(line))},
		{"base64", []byte(b64)},
		{"json", []byte(lines.String())},
	} {
		b.Run(in.name, func(b *testing.B) {
			w := New(discard{}, secrets)
			b.SetBytes(int64(len(in.chunk)))
			for b.Loop() {
				if _, err := w.Write(in.chunk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNew measures what masking adds to each task's start: building
// the matcher for a delegate token, a proxy password and a task secret.
func BenchmarkNew(b *testing.B) {
	secrets := []string{"dlg_7f3a9c2e5b1d4f60a8e2c9b7d1f3e5a7", "pr0xy-pa55word", "correct horse battery staple!"}
	for b.Loop() {
		New(discard{}, secrets)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzWriterMatchesString checks, for any secrets, input and chunking,
// that the streaming Writer produces what String does, that String agrees
// with the reference masker, and that no form of a secret is left. The
// input gets one encoded form of the first secret spliced in (form picks
// which, at picks where), so that the fuzzer starts from matches of every
// kind.
func FuzzWriterMatchesString(f *testing.F) {
	f.Add("s3cr3t", "abc", "", "pw=s3cr3t abcabc", []byte{3, 1, 7}, uint8(0), uint8(3))
	f.Add("abc", "abcdef", "cde", "xabcdefx abcde", []byte{1}, uint8(1), uint8(0))
	f.Add("hunter2", "", "", "aHVudGVyMg== aHVudGVyMg", []byte{2, 5}, uint8(4), uint8(9))
	f.Add("aa", "a", "aaa", "aaaaaaaaaa", []byte{0, 1, 2}, uint8(2), uint8(1))
	f.Add("p@ss w<rd>", "x", "", "Basic dXNlcjpwQHNzIHc8cmQ+ {\"a\":\"p@ss w\\u003crd\\u003e\"}", []byte{4}, uint8(20), uint8(2))
	f.Fuzz(func(t *testing.T, s1, s2, s3, in string, chunks []byte, form, at uint8) {
		secrets := []string{s1, s2, s3}
		if fs := referenceForms(s1); len(fs) > 0 {
			k := min(int(at), len(in))
			in = in[:k] + fs[int(form)%len(fs)] + in[k:]
		}
		want := String(in, secrets)
		if len(in) <= 256 {
			if ref := reference(in, secrets); ref != want {
				t.Fatalf("String %q, reference %q", want, ref)
			}
		}
		var sizes []int
		for _, c := range chunks {
			sizes = append(sizes, int(c%16)+1)
		}
		if len(sizes) == 0 {
			sizes = []int{len(in) + 1}
		}
		if got := streamed(t, in, secrets, sizes); got != want {
			t.Fatalf("streamed %q, String %q", got, want)
		}
		assertNoLeak(t, want, secrets)
	})
}

// assertNoLeak fails if masked output still contains a secret or one of its
// encoded forms. A form containing '*' is skipped: it may legitimately
// appear next to or inside a Replacement.
func assertNoLeak(t *testing.T, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, p := range referenceForms(s) {
			if strings.Contains(p, "*") {
				continue
			}
			if strings.Contains(out, p) {
				t.Fatalf("output %q leaks %q (form of secret %q)", out, p, s)
			}
		}
	}
}

// streamed writes in through a Writer in chunks whose sizes cycle through
// sizes, then flushes, and returns what reached the destination.
func streamed(t testing.TB, in string, secrets []string, sizes []int) string {
	t.Helper()
	var dst bytes.Buffer
	w := New(&dst, secrets)
	for i, k := 0, 0; i < len(in); k++ {
		n := min(sizes[k%len(sizes)], len(in)-i)
		if got, err := w.Write([]byte(in[i : i+n])); err != nil || got != n {
			t.Fatalf("Write = %d, %v; want %d, nil", got, err, n)
		}
		i += n
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return dst.String()
}

func streamedParts(t *testing.T, secrets []string, parts ...string) string {
	t.Helper()
	var dst bytes.Buffer
	w := New(&dst, secrets)
	for _, p := range parts {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return dst.String()
}

// reference masks by brute force: it finds every occurrence of every
// pattern, merges occurrences that overlap, and replaces each merged
// region.
func reference(in string, secrets []string) string {
	type span struct{ start, end int }
	var spans []span
	for _, p := range referencePatterns(secrets) {
		for i := 0; i+len(p) <= len(in); i++ {
			if in[i:i+len(p)] == p {
				spans = append(spans, span{i, i + len(p)})
			}
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	var out strings.Builder
	pos := 0
	for k := 0; k < len(spans); {
		s := spans[k]
		end := s.end
		k++
		for k < len(spans) && spans[k].start < end {
			end = max(end, spans[k].end)
			k++
		}
		out.WriteString(in[pos:s.start])
		out.WriteString(Replacement)
		pos = end
	}
	out.WriteString(in[pos:])
	return out.String()
}

// referencePatterns is patterns computed independently, by referenceForms.
func referencePatterns(secrets []string) []string {
	var ps []string
	for _, s := range secrets {
		ps = append(ps, referenceForms(s)...)
	}
	return ps
}

// referenceForms computes the forms of a secret the package comment lists
// without the package's code: base64 characters by comparing encodings
// with different neighbours, JSON escapes with encoding/json and a
// rune-by-rune escaper, percent-encodings with net/url and a byte-by-byte
// escaper. The order differs from forms; the set is the same.
func referenceForms(s string) []string {
	if s == "" {
		return nil
	}
	out := []string{s}
	add := func(f string) {
		if len(f) >= MinEncodedLen && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	fill := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	for k := 0; k < 3; k++ {
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			// Followed by other data: the characters that are the same
			// whatever the neighbours are (all-zero or all-one bits).
			lo := e.EncodeToString(slices.Concat(fill(0, k), []byte(s), fill(0, 3)))
			hi := e.EncodeToString(slices.Concat(fill(0xff, k), []byte(s), fill(0xff, 3)))
			i := 0
			for i < len(lo) && lo[i] != hi[i] {
				i++
			}
			j := i
			for j < len(lo) && lo[j] == hi[j] {
				j++
			}
			add(lo[i:j])
			// Ending the data: the tail that does not depend on what
			// precedes.
			for _, enc := range []*base64.Encoding{e, e.WithPadding(base64.NoPadding)} {
				lo := enc.EncodeToString(slices.Concat(fill(0, k), []byte(s)))
				hi := enc.EncodeToString(slices.Concat(fill(0xff, k), []byte(s)))
				i := len(lo)
				for i > 0 && lo[i-1] == hi[i-1] {
					i--
				}
				add(lo[i:])
			}
		}
	}
	b, _ := json.Marshal(s)
	goHTML := string(b[1 : len(b)-1])
	for _, style := range []struct{ html, lineSep, ascii bool }{{true, true, false}, {false, true, false}, {false, false, false}, {false, false, true}} {
		for _, hex := range []string{"%04x", "%04X"} {
			q := referenceJSON(s, style.html, style.lineSep, style.ascii, hex)
			if style.html && hex == "%04x" && q != goHTML {
				panic(fmt.Sprintf("referenceJSON(%q) = %q, json.Marshal %q", s, q, goHTML))
			}
			add(q)
		}
	}
	lower := regexp.MustCompile(`%[0-9A-F]{2}`)
	for _, q := range []string{url.QueryEscape(s), url.PathEscape(s), referenceStrict(s)} {
		add(q)
		add(lower.ReplaceAllStringFunc(q, strings.ToLower))
	}
	return out
}

// referenceJSON escapes s as a JSON string's contents, rune by rune: '"'
// and '\\', the short escapes, other control characters; with html also
// '<', '>' and '&'; with lineSep U+2028 and U+2029; with ascii every rune
// outside ' '..'~' (in UTF-16). Each byte of invalid UTF-8 becomes U+FFFD,
// escaped like encoding/json does in the styles with lineSep.
func referenceJSON(s string, html, lineSep, ascii bool, hex string) string {
	short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		invalid := r == utf8.RuneError && size == 1
		switch {
		case short[r] != "":
			b.WriteString(short[r])
		case r < 0x20 || html && strings.ContainsRune("<>&", r) || lineSep && (r == 0x2028 || r == 0x2029 || invalid) || ascii && (r < ' ' || r > '~'):
			for _, u := range utf16.Encode([]rune{r}) {
				b.WriteString(`\u` + fmt.Sprintf(hex, u))
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// referenceStrict percent-encodes every byte but letters, digits and "-._~".
func referenceStrict(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
