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
// A group is the delegates of one name whose tokens have exactly one
// scope (Org, Project; empty: the account's).
type UpgradePolicy struct {
	// Name is the group's name, normalized (lower case).
	Name         string
	Org, Project string
	Pinned       string
	Held         bool
	// Ring is the group's ring; "" is the default ring.
	Ring      string
	UpdatedAt time.Time
}

// UpgradeReport is what the watcher of a delegate on one host last said
// about its upgrade.
type UpgradeReport struct {
	AccountID string
	// Org and Project are the scope of the token the watcher sent.
	Org, Project string
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

// UpgradeGroupKey identifies a delegate group of an account: its scope
// and normalized name (names of orgs, projects and delegates have no
// '/'). It keys UpgradePolicies' map.
func UpgradeGroupKey(org, project, name string) string {
	return org + "/" + project + "/" + groupName(name)
}

// SetUpgradePolicy sets a delegate group's policy; a zero policy (no pin,
// not held) removes it.
func (s *Store) SetUpgradePolicy(ctx context.Context, acct string, p UpgradePolicy) error {
	name := groupName(p.Name)
	return s.write(ctx, func(tx *sql.Tx) error {
		if p.Pinned == "" && !p.Held && p.Ring == "" {
			_, err := s.w(tx).exec(ctx, `DELETE FROM upgrade_policies WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
				acct, p.Org, p.Project, name)
			return err
		}
		_, err := s.w(tx).exec(ctx, `INSERT INTO upgrade_policies (account_id, org, project, name, pinned, held, ring, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (account_id, org, project, name) DO UPDATE SET pinned = excluded.pinned, held = excluded.held, ring = excluded.ring,
	updated_at = excluded.updated_at`,
			acct, p.Org, p.Project, name, p.Pinned, boolInt(p.Held), p.Ring, micros(p.UpdatedAt))
		return err
	})
}

// GetUpgradePolicy returns the policy of the group name of scope
// org/project (the zero policy, with Name and the scope set, when it has
// none).
func (s *Store) GetUpgradePolicy(ctx context.Context, acct, org, project, name string) (UpgradePolicy, error) {
	p := UpgradePolicy{Name: groupName(name), Org: org, Project: project}
	var held int
	var updated int64
	err := s.r(nil).queryRow(ctx, `SELECT pinned, held, ring, updated_at FROM upgrade_policies
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
		acct, org, project, p.Name).Scan(&p.Pinned, &held, &p.Ring, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return UpgradePolicy{}, err
	}
	p.Held, p.UpdatedAt = held != 0, fromMicros(updated)
	return p, nil
}

// UpgradePolicies returns the account's policies by UpgradeGroupKey.
func (s *Store) UpgradePolicies(ctx context.Context, acct string) (map[string]UpgradePolicy, error) {
	rows, err := s.r(nil).query(ctx, `SELECT org, project, name, pinned, held, ring, updated_at FROM upgrade_policies WHERE account_id = ?`, acct)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]UpgradePolicy{}
	for rows.Next() {
		var p UpgradePolicy
		var held int
		var updated int64
		if err := rows.Scan(&p.Org, &p.Project, &p.Name, &p.Pinned, &held, &p.Ring, &updated); err != nil {
			return nil, err
		}
		p.Held, p.UpdatedAt = held != 0, fromMicros(updated)
		out[UpgradeGroupKey(p.Org, p.Project, p.Name)] = p
	}
	return out, rows.Err()
}

// ReportUpgrade records what a watcher said, replacing what it said before.
func (s *Store) ReportUpgrade(ctx context.Context, r UpgradeReport) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.w(tx).exec(ctx, `INSERT INTO upgrade_reports (account_id, org, project, name, hostname, state, target, reason, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (account_id, org, project, name, hostname) DO UPDATE SET state = excluded.state, target = excluded.target,
	reason = excluded.reason, updated_at = excluded.updated_at`,
			r.AccountID, r.Org, r.Project, groupName(r.Name), strings.ToLower(r.Hostname), r.State, r.Target, cleanText(r.Reason), micros(r.UpdatedAt))
		return err
	})
}

// UpgradeReports returns the account's watcher reports, keyed by
// UpgradeReportKey.
func (s *Store) UpgradeReports(ctx context.Context, acct string) (map[string]UpgradeReport, error) {
	rows, err := s.r(nil).query(ctx, `SELECT org, project, name, hostname, state, target, reason, updated_at FROM upgrade_reports
	WHERE account_id = ?`, acct)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]UpgradeReport{}
	for rows.Next() {
		r := UpgradeReport{AccountID: acct}
		var updated int64
		if err := rows.Scan(&r.Org, &r.Project, &r.Name, &r.Hostname, &r.State, &r.Target, &r.Reason, &updated); err != nil {
			return nil, err
		}
		r.UpdatedAt = fromMicros(updated)
		out[UpgradeReportKey(r.Org, r.Project, r.Name, r.Hostname)] = r
	}
	return out, rows.Err()
}

// UpgradeReportKey is the key of UpgradeReports' map: the group's key
// (UpgradeGroupKey) + "|" + the lower-case hostname.
func UpgradeReportKey(org, project, name, hostname string) string {
	return UpgradeGroupKey(org, project, name) + "|" + strings.ToLower(strings.TrimSpace(hostname))
}

// RingKey identifies a ring of one scope: the key of RingSoaks' map.
func RingKey(org, project, ring string) string { return org + "/" + project + "/" + ring }

// RingReached records that every delegate of the ring of scope
// org/project first ran version at at (a later call keeps the first
// time) and returns the time recorded.
func (s *Store) RingReached(ctx context.Context, acct, org, project, ring, version string, at time.Time) (time.Time, error) {
	var out time.Time
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `INSERT INTO ring_soaks (account_id, org, project, ring, version, reached_at) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (account_id, org, project, ring, version) DO NOTHING`, acct, org, project, ring, version, micros(at)); err != nil {
			return err
		}
		var reached int64
		if err := s.w(tx).queryRow(ctx, `SELECT reached_at FROM ring_soaks
	WHERE account_id = ? AND org = ? AND project = ? AND ring = ? AND version = ?`,
			acct, org, project, ring, version).Scan(&reached); err != nil {
			return err
		}
		out = fromMicros(reached)
		return nil
	})
	return out, err
}

// RingSoaks returns when each ring of each scope of the account first ran
// version entirely, by RingKey.
func (s *Store) RingSoaks(ctx context.Context, acct, version string) (map[string]time.Time, error) {
	rows, err := s.r(nil).query(ctx, `SELECT org, project, ring, reached_at FROM ring_soaks WHERE account_id = ? AND version = ?`, acct, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var org, project, ring string
		var reached int64
		if err := rows.Scan(&org, &project, &ring, &reached); err != nil {
			return nil, err
		}
		out[RingKey(org, project, ring)] = fromMicros(reached)
	}
	return out, rows.Err()
}
