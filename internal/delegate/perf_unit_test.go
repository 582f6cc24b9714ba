package delegate

import (
	"sync"
	"testing"
)

func TestGaugeMaxSinceLastTake(t *testing.T) {
	t.Parallel()
	var g gauge
	if got := g.takeMax(); got != 0 {
		t.Fatalf("idle gauge: max %d", got)
	}
	end1 := g.begin()
	end2 := g.begin()
	end3 := g.begin()
	end3()
	end2()
	if got := g.takeMax(); got != 3 {
		t.Errorf("max after three at once = %d, want 3", got)
	}
	// The next period starts at what is still in progress.
	if got := g.takeMax(); got != 1 {
		t.Errorf("max with one still running = %d, want 1", got)
	}
	end1()
	if got := g.takeMax(); got != 1 {
		t.Errorf("max of the period in which the last one ended = %d, want 1", got)
	}
	if got := g.takeMax(); got != 0 {
		t.Errorf("max of an idle period = %d, want 0", got)
	}
	var nilGauge *gauge
	nilGauge.begin()() // a checker without a gauge counts nothing

	// Concurrent begins: the maximum is exactly the number held at once.
	var wg sync.WaitGroup
	ends := make(chan func(), 50)
	for range 50 {
		wg.Go(func() { ends <- g.begin() })
	}
	wg.Wait()
	close(ends)
	for end := range ends {
		end()
	}
	if got := g.takeMax(); got != 50 {
		t.Errorf("max of 50 concurrent = %d, want 50", got)
	}
}

func TestParseProcessTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "1234 (legate) S 1 1234 1234 0 -1 4194560 1043 0 0 0 25 7 0 0 20 0 9 0 12345 1261568 3000 18446744073709551615", want: 32},
		{in: "1 (a b) c)) R 0 1 1 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 1 1 1", want: 150},
		{in: "no parenthesis here", wantErr: true},
		{in: "1 (x) S 1 2 3", wantErr: true},
		{in: "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u s 0", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseProcessTicks(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseProcessTicks(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseKB(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"\t  12345 kB": 12345 << 10, " 0 kB": 0} {
		if got, err := parseKB(in); err != nil || got != want {
			t.Errorf("parseKB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"12345", "12 MB", "-1 kB", "x kB", ""} {
		if _, err := parseKB(in); err == nil {
			t.Errorf("parseKB(%q): no error", in)
		}
	}
}

func TestCPUSamplerReadsThisProcess(t *testing.T) {
	t.Parallel()
	var s cpuSampler
	if _, _, ok := s.sample(); ok {
		t.Fatalf("the first sample has no load")
	}
	if !s.valid {
		t.Skip("no /proc on this system")
	}
	// Burn CPU until a clock tick has passed, so there is a difference.
	deadline := s.all + 1
	for n := 0; n < 1e9; n++ {
		if _, all, err := readCPU(); err == nil && all > deadline {
			break
		}
	}
	proc, system, ok := s.sample()
	if !ok || proc < 0 || proc > 100 || system < 0 || system > 100 {
		t.Errorf("sample = %v%%, %v%%, %v; want loads in 0..100", proc, system, ok)
	}
	if rss, err := readRSS(); err != nil || rss <= 0 {
		t.Errorf("readRSS = %d, %v", rss, err)
	}
}
