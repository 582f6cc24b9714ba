package mask

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

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

func BenchmarkWriter(b *testing.B) {
	chunk := bytes.Repeat([]byte("a typical log line, with words, numbers 12345, and some punctuation!\n"), 512)
	w := New(discard{}, []string{"s3cr3t-value", "another-secret"})
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func FuzzWriterMatchesString(f *testing.F) {
	f.Add("s3cr3t", "abc", "", "pw=s3cr3t abcabc", []byte{3, 1, 7})
	f.Add("abc", "abcdef", "cde", "xabcdefx abcde", []byte{1})
	f.Add("hunter2", "", "", "aHVudGVyMg== aHVudGVyMg", []byte{2, 5})
	f.Add("aa", "a", "aaa", "aaaaaaaaaa", []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, s1, s2, s3, in string, chunks []byte) {
		secrets := []string{s1, s2, s3}
		want := String(in, secrets)
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
// base64 forms. A raw secret containing '*' is skipped: it may legitimately
// appear next to or inside a Replacement.
func assertNoLeak(t *testing.T, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for i, p := range patterns([]string{s}) {
			if i == 0 && strings.Contains(p, "*") {
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
	for _, p := range patterns(secrets) {
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
