package api

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/store"
)

// ViewScopes is the store filter of the scopes where pol grants perm: nil
// when it grants it on the whole account (no filter), else one entry per
// scope (an empty list matches nothing). Listings filter in the store,
// before their limit, so that a page is full whenever enough rows exist.
func ViewScopes(pol *access.Policy, perm access.Permission) []store.ScopeFilter {
	all, scopes := pol.Scopes(perm)
	if all {
		return nil
	}
	out := make([]store.ScopeFilter, 0, len(scopes))
	for _, sc := range scopes {
		out = append(out, store.ScopeFilter{Org: sc.Org, Project: sc.Project})
	}
	return out
}

// ParseSince reads a listing's since= parameter: a time (RFC 3339) or a
// duration back from now (24h, 90m, 7d).
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

// PrincipalLabel names who acts, as a task records its submitter and a
// pipeline run its trigger: "user alice", "service account ci", or
// "account" for a key that acts as its whole account (written to the
// store before keys had owners).
func PrincipalLabel(p access.Principal) string {
	switch p.Kind {
	case access.KindUser, access.KindServiceAccount:
		return p.String()
	case "":
		return ""
	}
	return p.Kind
}

// UTC is t in UTC, as the API writes times, or nil.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
