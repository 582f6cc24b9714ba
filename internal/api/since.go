package api

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseSince reads the since= query parameter of a listing: a time (RFC
// 3339) or a duration back from now (24h, 90m, 7d).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && n <= 100000 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("since=" + strconv.Quote(s) + ": use a time (2026-11-23T08:00:00Z) or a duration back from now (24h, 7d)")
}
