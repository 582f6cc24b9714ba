package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// UpgradePolicy is a delegate group's upgrade policy: pinned to a version
// or held back. The zero value (no row) wants the manager's own version.
type UpgradePolicy struct {
	// Name is the group's name, normalized (lower case).
	Name   string
	Pinned string
	Held   bool
	// Ring is the group's ring; "" is the default ring.
	Ring      string
	UpdatedAt time.Time
}

// UpgradeReport is what the watcher of a delegate on one host last said
// about its upgrade.
type UpgradeReport struct {
	AccountID string
	// Name (normalized) and Hostname identify the delegate on its host.
	Name     string
	Hostname string
	// State is "" (idle), "upgrading" or "failed"; Target the version it
	// upgrades (or failed to upgrade) to; Reason why it failed.
	State     string
	Target    string
	Reason    string
	UpdatedAt time.Time
}

func groupName(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// SetUpgradePolicy sets a delegate group's policy; a zero policy (no pin,
// not held) removes it.
func (s *Store) SetUpgradePolicy(ctx context.Context, acct string, p UpgradePolicy) error {
	name := groupName(p.Name)
	return s.write(ctx, func(tx *sql.Tx) error {
		if p.Pinned == "" && !p.Held && p.Ring == "" {
			_, err := s.w(tx).exec(ctx, `DELETE FROM upgrade_policies WHERE account_id = ? AND name = ?`, acct, name)
			return err
		}
		_, err := s.w(tx).exec(ctx, `INSERT INTO upgrade_policies (account_id, name, pinned, held, ring, updated_at) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (account_id, name) DO UPDATE SET pinned = excluded.pinned, held = excluded.held, ring = excluded.ring,
	updated_at = excluded.updated_at`,
			acct, name, p.Pinned, boolInt(p.Held), p.Ring, micros(p.UpdatedAt))
		return err
	})
}

// GetUpgradePolicy returns a delegate group's policy (the zero policy,
// with Name set, when it has none).
func (s *Store) GetUpgradePolicy(ctx context.Context, acct, name string) (UpgradePolicy, error) {
	p := UpgradePolicy{Name: groupName(name)}
	var held int
	var updated int64
	err := s.r(nil).queryRow(ctx, `SELECT pinned, held, ring, updated_at FROM upgrade_policies WHERE account_id = ? AND name = ?`,
		acct, p.Name).Scan(&p.Pinned, &held, &p.Ring, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return UpgradePolicy{}, err
	}
	p.Held, p.UpdatedAt = held != 0, fromMicros(updated)
	return p, nil
}

// UpgradePolicies returns the account's policies by normalized group name.
func (s *Store) UpgradePolicies(ctx context.Context, acct string) (map[string]UpgradePolicy, error) {
	rows, err := s.r(nil).query(ctx, `SELECT name, pinned, held, ring, updated_at FROM upgrade_policies WHERE account_id = ?`, acct)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]UpgradePolicy{}
	for rows.Next() {
		var p UpgradePolicy
		var held int
		var updated int64
		if err := rows.Scan(&p.Name, &p.Pinned, &held, &p.Ring, &updated); err != nil {
			return nil, err
		}
		p.Held, p.UpdatedAt = held != 0, fromMicros(updated)
		out[p.Name] = p
	}
	return out, rows.Err()
}

// ReportUpgrade records what a watcher said, replacing what it said before.
func (s *Store) ReportUpgrade(ctx context.Context, r UpgradeReport) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.w(tx).exec(ctx, `INSERT INTO upgrade_reports (account_id, name, hostname, state, target, reason, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (account_id, name, hostname) DO UPDATE SET state = excluded.state, target = excluded.target,
	reason = excluded.reason, updated_at = excluded.updated_at`,
			r.AccountID, groupName(r.Name), strings.ToLower(r.Hostname), r.State, r.Target, cleanText(r.Reason), micros(r.UpdatedAt))
		return err
	})
}

// UpgradeReports returns the account's watcher reports, keyed by
// normalized name + "|" + lower-case hostname (UpgradeReportKey).
func (s *Store) UpgradeReports(ctx context.Context, acct string) (map[string]UpgradeReport, error) {
	rows, err := s.r(nil).query(ctx, `SELECT name, hostname, state, target, reason, updated_at FROM upgrade_reports WHERE account_id = ?`, acct)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]UpgradeReport{}
	for rows.Next() {
		r := UpgradeReport{AccountID: acct}
		var updated int64
		if err := rows.Scan(&r.Name, &r.Hostname, &r.State, &r.Target, &r.Reason, &updated); err != nil {
			return nil, err
		}
		r.UpdatedAt = fromMicros(updated)
		out[UpgradeReportKey(r.Name, r.Hostname)] = r
	}
	return out, rows.Err()
}

// UpgradeReportKey is the key of UpgradeReports' map.
func UpgradeReportKey(name, hostname string) string {
	return groupName(name) + "|" + strings.ToLower(strings.TrimSpace(hostname))
}

// RingReached records that every delegate of ring first ran version at
// at (a later call keeps the first time) and returns the time recorded.
func (s *Store) RingReached(ctx context.Context, acct, ring, version string, at time.Time) (time.Time, error) {
	var out time.Time
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `INSERT INTO ring_soaks (account_id, ring, version, reached_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (account_id, ring, version) DO NOTHING`, acct, ring, version, micros(at)); err != nil {
			return err
		}
		var reached int64
		if err := s.w(tx).queryRow(ctx, `SELECT reached_at FROM ring_soaks WHERE account_id = ? AND ring = ? AND version = ?`,
			acct, ring, version).Scan(&reached); err != nil {
			return err
		}
		out = fromMicros(reached)
		return nil
	})
	return out, err
}

// RingSoaks returns when each ring of the account first ran version
// entirely, by ring.
func (s *Store) RingSoaks(ctx context.Context, acct, version string) (map[string]time.Time, error) {
	rows, err := s.r(nil).query(ctx, `SELECT ring, reached_at FROM ring_soaks WHERE account_id = ? AND version = ?`, acct, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var ring string
		var reached int64
		if err := rows.Scan(&ring, &reached); err != nil {
			return nil, err
		}
		out[ring] = fromMicros(reached)
	}
	return out, rows.Err()
}
