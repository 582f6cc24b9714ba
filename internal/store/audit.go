package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// AuditEvent is one stored record of the audit log (protocol.AuditEvent
// with the account and the principal's ID).
type AuditEvent struct {
	ID             string
	AccountID      string
	At             time.Time
	PrincipalKind  string
	PrincipalID    string
	Principal      string
	Credential     string
	CredentialName string
	Action         string
	ResourceType   string
	Resource       string
	Org            string
	Project        string
	Address        string
	Outcome        string
	Status         int
	Detail         string
}

// AuditCursor is where a page of the audit log ends: the time and ID of
// its last (oldest) record.
type AuditCursor struct {
	At time.Time
	ID string
}

// AuditFilter selects records of one account's audit log. Zero fields
// select everything.
type AuditFilter struct {
	AccountID string
	// Since keeps the records at or after it.
	Since time.Time
	// Principal keeps the records of the principal of that name.
	Principal string
	// ResourceType and Resource keep the records of that type (and name).
	ResourceType string
	Resource     string
	// Action keeps the records of that action and of the actions beneath
	// it (task keeps task and task.cancel, not taskx); ActionPrefix those
	// whose action starts with it (task. keeps task.cancel).
	Action       string
	ActionPrefix string
	// After, when set, keeps the records older than it (the next page).
	After *AuditCursor
	// Limit is the page size (at most 1,000; 0 means 100).
	Limit int
}

const auditCols = `id, account_id, at, principal_kind, principal_id, principal, credential, credential_name,
	action, resource_type, resource, org, project, address, outcome, status, detail`

// AddAuditEvent records one audit event.
func (s *Store) AddAuditEvent(ctx context.Context, e AuditEvent) error {
	err := s.insert(ctx, `INSERT INTO audit_events (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.AccountID, micros(e.At), e.PrincipalKind, e.PrincipalID, cleanText(e.Principal), e.Credential,
		cleanText(e.CredentialName), e.Action, e.ResourceType, cleanText(e.Resource), cleanText(e.Org),
		cleanText(e.Project), cleanText(e.Address), e.Outcome, e.Status, cleanText(e.Detail))
	if err != nil {
		return fmt.Errorf("record audit event %s: %w", e.Action, err)
	}
	return nil
}

// ListAuditEvents returns a page of the records f selects, newest first.
func (s *Store) ListAuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	q := `SELECT ` + auditCols + ` FROM audit_events WHERE account_id = ?`
	args := []any{f.AccountID}
	if !f.Since.IsZero() {
		q += ` AND at >= ?`
		args = append(args, micros(f.Since))
	}
	if f.Principal != "" {
		q += ` AND principal = ?`
		args = append(args, f.Principal)
	}
	if f.ResourceType != "" {
		q += ` AND resource_type = ?`
		args = append(args, f.ResourceType)
	}
	if f.Resource != "" {
		q += ` AND resource = ?`
		args = append(args, f.Resource)
	}
	// substr, not LIKE: "_" is a wildcard there and SQLite's LIKE
	// ignores case.
	if f.Action != "" {
		q += ` AND (action = ? OR substr(action, 1, ?) = ?)`
		args = append(args, f.Action, len(f.Action)+1, f.Action+".")
	}
	if f.ActionPrefix != "" {
		q += ` AND substr(action, 1, ?) = ?`
		args = append(args, len(f.ActionPrefix), f.ActionPrefix)
	}
	if f.After != nil {
		q += ` AND (at < ? OR (at = ? AND id < ?))`
		at := micros(f.After.At)
		args = append(args, at, at, f.After.ID)
	}
	q += ` ORDER BY at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r(nil).query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	defer rows.Close()
	var out []AuditEvent
	for rows.Next() {
		var e AuditEvent
		var at int64
		if err := rows.Scan(&e.ID, &e.AccountID, &at, &e.PrincipalKind, &e.PrincipalID, &e.Principal, &e.Credential,
			&e.CredentialName, &e.Action, &e.ResourceType, &e.Resource, &e.Org, &e.Project, &e.Address,
			&e.Outcome, &e.Status, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit events: %w", err)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	return out, nil
}

// PruneAuditEvents removes at most limit records, of every account,
// older than before, and says how many it removed.
func (s *Store) PruneAuditEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.w(tx).exec(ctx, `DELETE FROM audit_events WHERE id IN
	(SELECT id FROM audit_events WHERE at < ? ORDER BY at LIMIT ?)`, micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit events: %w", err)
	}
	return int(n), nil
}

// Event is the record as the API shows it.
func (e AuditEvent) Event() protocol.AuditEvent {
	return protocol.AuditEvent{
		ID: e.ID, Time: e.At.UTC(), PrincipalKind: e.PrincipalKind, Principal: e.Principal,
		Credential: e.Credential, CredentialName: e.CredentialName, Action: e.Action,
		ResourceType: e.ResourceType, Resource: e.Resource, Org: e.Org, Project: e.Project,
		Address: e.Address, Outcome: e.Outcome, Status: e.Status, Detail: e.Detail,
	}
}
