package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// capRows counts the stored capability results, expired ones included.
func capRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.reader.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM capability_results").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, in := range []Instance{
			{ID: "a1", AccountID: "acc1", IdentityKey: "a1", RegisteredAt: t0},
			{ID: "a2", AccountID: "acc1", IdentityKey: "a2", RegisteredAt: t0},
			{ID: "b1", AccountID: "acc2", IdentityKey: "b1", RegisteredAt: t0},
		} {
			if _, err := s.UpsertInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		allow := func(inst, criteria string, checked, ttl time.Duration) CapabilityResult {
			return CapabilityResult{InstanceID: inst, Criteria: criteria, OK: true, CheckedAt: at(checked), ExpiresAt: at(checked + ttl)}
		}
		denyRes := func(inst, criteria, msg string, checked, ttl time.Duration) CapabilityResult {
			return CapabilityResult{InstanceID: inst, Criteria: criteria, Error: msg, CheckedAt: at(checked), ExpiresAt: at(checked + ttl)}
		}
		const allowTTL, denyTTL = 6 * time.Hour, 5 * time.Minute

		first := []CapabilityResult{
			allow("a2", "https://git", 0, allowTTL),
			denyRes("a1", "tcp://db:5432", "connection refused", 0, denyTTL),
			allow("a1", "https://git", 0, allowTTL),
			allow("b1", "https://git", 0, allowTTL),
			allow("ghost", "binary:kubectl", 0, allowTTL), // unknown instance: all accounts only
		}
		if err := s.RecordCapabilities(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCapabilities(ctx, nil); err != nil {
			t.Errorf("RecordCapabilities(nil): %v", err)
		}
		// a1's deny entry becomes an allow entry (newer), a2's allow entry
		// becomes a deny entry; a late report checked earlier changes nothing;
		// within a batch the last of two equal times wins.
		second := []CapabilityResult{
			allow("a1", "tcp://db:5432", time.Minute, allowTTL),
			denyRes("a2", "https://git", "timeout", time.Minute, denyTTL),
			denyRes("a1", "https://git", "late report", -time.Minute, denyTTL),
			denyRes("b1", "https://git", "first", time.Minute, denyTTL),
			denyRes("b1", "https://git", "second", time.Minute, denyTTL),
		}
		if err := s.RecordCapabilities(ctx, second); err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name    string
			account string
			now     time.Duration
			want    []CapabilityResult
		}{
			{"acc1", "acc1", 2 * time.Minute, []CapabilityResult{first[2], second[0], second[1]}},
			{"acc2", "acc2", 2 * time.Minute, []CapabilityResult{second[4]}},
			{"all accounts", "", 2 * time.Minute, []CapabilityResult{first[2], second[0], second[1], second[4], first[4]}},
			{"unknown account", "acc3", 2 * time.Minute, nil},
			// At 6m the deny entries (checked at 1m, 5m TTL) expire: ExpiresAt
			// must be after now.
			{"deny entries expired", "acc1", 6 * time.Minute, []CapabilityResult{first[2], second[0]}},
			{"deny entries expired, acc2", "acc2", 6 * time.Minute, nil},
			{"all expired", "", 7 * time.Hour, nil},
		}
		for _, tt := range tests {
			got, err := s.LiveCapabilities(ctx, tt.account, at(tt.now))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: LiveCapabilities (-want +got):\n%s", tt.name, diff)
			}
		}
		// Reading at 7h purged every expired row.
		if n := capRows(t, s); n != 0 {
			t.Errorf("%d rows left after the purge", n)
		}
		// A purged criteria can be recorded again.
		again := allow("a1", "https://git", 8*time.Hour, allowTTL)
		if err := s.RecordCapabilities(ctx, []CapabilityResult{again}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LiveCapabilities(ctx, "acc1", at(8*time.Hour))
		if diff := cmp.Diff([]CapabilityResult{again}, got); err != nil || diff != "" {
			t.Errorf("after re-record, error %v (-want +got):\n%s", err, diff)
		}
	})
}

func TestRecordCapabilitiesBatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		const instances, criteria = 10, 100
		for i := range instances {
			acc := "acc1"
			if i%2 == 1 {
				acc = "acc2"
			}
			id := fmt.Sprintf("i%02d", i)
			if _, err := s.UpsertInstance(ctx, Instance{ID: id, AccountID: acc, IdentityKey: id, RegisteredAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		batch := func(checked time.Duration, ok bool) []CapabilityResult {
			var rs []CapabilityResult
			for i := range instances {
				for c := range criteria {
					rs = append(rs, CapabilityResult{
						InstanceID: fmt.Sprintf("i%02d", i), Criteria: fmt.Sprintf("https://svc-%03d", c),
						OK: ok, CheckedAt: at(checked), ExpiresAt: at(checked + time.Hour),
					})
				}
			}
			return rs
		}
		if err := s.RecordCapabilities(ctx, batch(0, false)); err != nil {
			t.Fatal(err)
		}
		want := batch(time.Minute, true)
		if err := s.RecordCapabilities(ctx, want); err != nil {
			t.Fatal(err)
		}
		if n := capRows(t, s); n != instances*criteria {
			t.Errorf("%d rows, want %d", n, instances*criteria)
		}
		got, err := s.LiveCapabilities(ctx, "", at(2*time.Minute))
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("LiveCapabilities error %v (-want +got):\n%s", err, diff)
		}
		acc1, err := s.LiveCapabilities(ctx, "acc1", at(2*time.Minute))
		if err != nil || len(acc1) != instances*criteria/2 {
			t.Errorf("acc1 has %d live results, %v; want %d", len(acc1), err, instances*criteria/2)
		}
		for _, r := range acc1 {
			var i int
			fmt.Sscanf(r.InstanceID, "i%d", &i)
			if i%2 != 0 {
				t.Fatalf("acc1 result of acc2's instance %s", r.InstanceID)
			}
		}
	})
}

func BenchmarkRecordCapabilities1000(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	rs := make([]CapabilityResult, 1000)
	for i := range rs {
		rs[i] = CapabilityResult{
			InstanceID: fmt.Sprintf("i%02d", i%20), Criteria: fmt.Sprintf("https://svc-%03d.example.com", i/20),
			OK: i%7 != 0, Error: "", CheckedAt: t0, ExpiresAt: at(6 * time.Hour),
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Each batch is newer than the last, so every row is replaced.
		checked := at(time.Duration(i) * time.Second)
		for j := range rs {
			rs[j].CheckedAt, rs[j].ExpiresAt = checked, checked.Add(6*time.Hour)
		}
		if err := s.RecordCapabilities(ctx, rs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/row")
}
