package delegate

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExcerptKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"short", []string{"abc", "def"}, "abcdef"},
		{"exactly the limit", []string{"0123456789"}, "0123456789"},
		{"long, one write", []string{"0123456789ABCDEF"}, "01234\n[… 6 bytes left out …]\nBCDEF"},
		{"long, many writes", []string{"012", "345", "67", "89A", "BCDEF"}, "01234\n[… 6 bytes left out …]\nBCDEF"},
		{"long tail in small writes", []string{"01234", "a", "b", "c", "d", "e", "f", "g"}, "01234\n[… 2 bytes left out …]\ncdefg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &excerpt{limit: 10}
			var total int
			for _, w := range tt.writes {
				if n, err := e.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				total += len(w)
			}
			if diff := cmp.Diff(tt.want, e.String()); diff != "" {
				t.Errorf("excerpt (-want +got):\n%s", diff)
			}
			if e.total != int64(total) {
				t.Errorf("total %d, want %d", e.total, total)
			}
		})
	}
}

// FuzzExcerpt checks the excerpt against the whole output: it is the output
// itself when that fits, otherwise its head and tail around a marker.
func FuzzExcerpt(f *testing.F) {
	f.Add([]byte("hello world, this is long enough"), uint8(3))
	f.Add([]byte(""), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		const limit = 16
		e := &excerpt{limit: limit}
		n := max(int(step), 1)
		for i := 0; i < len(data); i += n {
			e.Write(data[i:min(i+n, len(data))])
		}
		got := e.String()
		if len(data) <= limit {
			if got != string(data) {
				t.Fatalf("excerpt %q of %q", got, data)
			}
			return
		}
		if !strings.HasPrefix(got, string(data[:limit/2])) || !strings.HasSuffix(got, string(data[len(data)-limit/2:])) {
			t.Fatalf("excerpt %q does not keep the head and tail of %q", got, data)
		}
	})
}

func TestLineLoggerLogsEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	l := &lineLogger{log: log, msg: "INIT_SCRIPT"}
	for _, w := range []string{"one\ntw", "o\r\n", "\nthree", "\n", strings.Repeat("x", maxLogLine+2), "\nlast"} {
		l.Write([]byte(w))
	}
	l.flush()
	want := []string{
		`level=INFO msg=INIT_SCRIPT line=one`,
		`level=INFO msg=INIT_SCRIPT line=two`,
		`level=INFO msg=INIT_SCRIPT line=""`,
		`level=INFO msg=INIT_SCRIPT line=three`,
		`level=INFO msg=INIT_SCRIPT line=` + strings.Repeat("x", maxLogLine),
		`level=INFO msg=INIT_SCRIPT line=xx`,
		`level=INFO msg=INIT_SCRIPT line=last`,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(buf.String()), "\n")); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
