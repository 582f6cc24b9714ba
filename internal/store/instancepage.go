package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// InstanceQuery selects a page of an account's instances, by delegate
// name: the instances of at most Names names after After, in name order,
// that match every filter set.
type InstanceQuery struct {
	AccountID string
	// After: only names after it (byte order, as ORDER BY name).
	After string
	// Names is how many names at most (0: every one).
	Names int
	// NameContains: names that contain it, ASCII case ignored.
	NameContains string
	// Name: that name only, ASCII case ignored (one delegate group).
	Name string
	// Tag: instances that have this tag.
	Tag string
	// Scopes: instances at or beneath one of them (nil: anywhere).
	Scopes []ScopeFilter
	// Deregistered includes the instances that deregistered.
	Deregistered bool
}

// likeEscape escapes the LIKE wildcards of s (ESCAPE '\').
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ListInstancePage lists the instances q selects, ordered by name then
// hostname. It reads only the rows of the page: the Delegates page and
// `legate delegates list --limit` stay fast with 10,000 instances.
func (s *Store) ListInstancePage(ctx context.Context, q InstanceQuery) ([]Instance, error) {
	where := []string{"account_id = ?"}
	args := []any{q.AccountID}
	if !q.Deregistered {
		where = append(where, "deregistered_at IS NULL")
	}
	if q.NameContains != "" {
		where = append(where, `LOWER(name) LIKE ? ESCAPE '\'`)
		args = append(args, "%"+likeEscape(strings.ToLower(q.NameContains))+"%")
	}
	if q.Name != "" {
		where = append(where, `LOWER(name) = ?`)
		args = append(args, strings.ToLower(q.Name))
	}
	if q.Tag != "" {
		// Tags are stored as a JSON list: the tag's JSON string, quotes
		// included, matches that tag only.
		b, _ := json.Marshal(q.Tag)
		where = append(where, `tags LIKE ? ESCAPE '\'`)
		args = append(args, "%"+likeEscape(string(b))+"%")
	}
	if q.Scopes != nil {
		w, a := scopeWhere(q.Scopes)
		where = append(where, w)
		args = append(args, a...)
	}
	cond := strings.Join(where, " AND ")
	sel := `SELECT ` + instanceCols + ` FROM instances WHERE ` + cond
	var all []any
	if q.Names > 0 || q.After != "" {
		names := `SELECT DISTINCT name FROM instances WHERE ` + cond + ` AND name > ? ORDER BY name`
		all = append(append(all, args...), args...)
		all = append(all, q.After)
		if q.Names > 0 {
			names += ` LIMIT ?`
			all = append(all, q.Names)
		}
		sel += ` AND name IN (` + names + `)`
	} else {
		all = args
	}
	rows, err := s.r(nil).query(ctx, sel+` ORDER BY name, hostname, id`, all...)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	out, err := scanAll(rows, scanInstance)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// ConfigurationResultsOf returns the last configuration result of each
// of the instances ids that has one, by instance ID.
func (s *Store) ConfigurationResultsOf(ctx context.Context, ids []string) (map[string]ConfigurationResult, error) {
	out := map[string]ConfigurationResult{}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		rows, err := s.r(nil).query(ctx, `SELECT instance_id, configuration, version, exit_code, error, output,
	output_bytes, started_at, finished_at, org, project FROM configuration_results WHERE instance_id IN (?`+strings.Repeat(", ?", n-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("configuration results: %w", err)
		}
		rs, err := scanAll(rows, scanConfigurationResult)
		if err != nil {
			return nil, fmt.Errorf("configuration results: %w", err)
		}
		for _, r := range rs {
			out[r.InstanceID] = r
		}
		ids = ids[n:]
	}
	return out, nil
}
