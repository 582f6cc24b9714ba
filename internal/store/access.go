package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Principal is a user or a service account (Kind "user" or
// "service_account"). Names are unique within an account across kinds.
type Principal struct {
	ID        string
	AccountID string
	Kind      string
	Name      string
	Display   string
	Disabled  bool
	// PasswordHash is an argon2id hash in PHC format; "" for none.
	PasswordHash string
	CreatedAt    time.Time
}

// Group is a named set of principals.
type Group struct {
	ID        string
	AccountID string
	Name      string
	CreatedAt time.Time
	// Members are principal IDs, filled in by ListGroups.
	Members []string
}

// Role is a custom role; built-in roles are not stored.
type Role struct {
	AccountID   string
	Name        string
	Description string
	Permissions []string
	CreatedAt   time.Time
}

// Binding grants Role to a subject at a scope (Org and Project "" for the
// account).
type Binding struct {
	ID          string
	AccountID   string
	Role        string
	SubjectKind string
	SubjectID   string
	Org         string
	Project     string
	CreatedAt   time.Time
}

// WebSession is a sign-in session of a user; only its token's hash is
// stored.
type WebSession struct {
	ID          string
	AccountID   string
	PrincipalID string
	Hash        string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	RevokedAt   *time.Time
}

const principalCols = `id, account_id, kind, name, display, disabled, password_hash, created_at`

func scanPrincipal(r rowScanner) (Principal, error) {
	var p Principal
	var disabled int
	var created int64
	if err := r.Scan(&p.ID, &p.AccountID, &p.Kind, &p.Name, &p.Display, &disabled, &p.PasswordHash, &created); err != nil {
		return Principal{}, err
	}
	p.Disabled, p.CreatedAt = disabled != 0, fromMicros(created)
	return p, nil
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// CreatePrincipal stores a user or service account; ErrConflict when the
// account has a principal of that name.
func (s *Store) CreatePrincipal(ctx context.Context, p Principal) error {
	err := s.insert(ctx, `INSERT INTO principals (`+principalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.ID, p.AccountID, p.Kind, p.Name, p.Display, boolInt(p.Disabled), p.PasswordHash, micros(p.CreatedAt))
	if err != nil {
		return fmt.Errorf("create %s %q: %w", p.Kind, p.Name, err)
	}
	return nil
}

// GetPrincipal returns the account's principal of that name; ErrNotFound.
func (s *Store) GetPrincipal(ctx context.Context, accountID, name string) (Principal, error) {
	p, err := scanPrincipal(s.r(nil).queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE account_id = ? AND name = ?`, accountID, name))
	if err != nil {
		return Principal{}, fmt.Errorf("get principal %q: %w", name, notFound(err))
	}
	return p, nil
}

// PrincipalByID returns a principal by ID; ErrNotFound.
func (s *Store) PrincipalByID(ctx context.Context, id string) (Principal, error) {
	p, err := scanPrincipal(s.r(nil).queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE id = ?`, id))
	if err != nil {
		return Principal{}, fmt.Errorf("get principal %s: %w", id, notFound(err))
	}
	return p, nil
}

// ListPrincipals lists the account's principals of a kind ("" for both),
// by name.
func (s *Store) ListPrincipals(ctx context.Context, accountID, kind string) ([]Principal, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+principalCols+` FROM principals WHERE account_id = ? AND (? = '' OR kind = ?) ORDER BY name`,
		accountID, kind, kind)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	defer rows.Close()
	var out []Principal
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, fmt.Errorf("list principals: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	return out, nil
}

// UpdatePrincipal sets the disabled flag and, when passwordHash is not
// nil, the password hash of the account's principal of that name, and
// returns it; ErrNotFound.
func (s *Store) UpdatePrincipal(ctx context.Context, accountID, name string, disabled bool, passwordHash *string) (Principal, error) {
	var p Principal
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		p, err = scanPrincipal(s.w(tx).queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE account_id = ? AND name = ?`, accountID, name))
		if err != nil {
			return notFound(err)
		}
		p.Disabled = disabled
		if passwordHash != nil {
			p.PasswordHash = *passwordHash
		}
		_, err = s.w(tx).exec(ctx, `UPDATE principals SET disabled = ?, password_hash = ? WHERE id = ?`, boolInt(p.Disabled), p.PasswordHash, p.ID)
		return err
	})
	if err != nil {
		return Principal{}, fmt.Errorf("update principal %q: %w", name, err)
	}
	return p, nil
}

// SetPassword sets the password hash of the account's principal of that
// name and, in the same transaction, ends what the old password gave: it
// revokes the principal's sign-in sessions (at now) but keepSession (the
// one that made the change; "" = none) and deletes its unused sign-in
// links. It returns the principal; ErrNotFound.
func (s *Store) SetPassword(ctx context.Context, accountID, name, hash, keepSession string, now time.Time) (Principal, error) {
	var p Principal
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		p, err = scanPrincipal(s.w(tx).queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE account_id = ? AND name = ?`, accountID, name))
		if err != nil {
			return notFound(err)
		}
		p.PasswordHash = hash
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE principals SET password_hash = ? WHERE id = ?`, []any{hash, p.ID}},
			{`UPDATE web_sessions SET revoked_at = ? WHERE principal_id = ? AND id <> ? AND revoked_at IS NULL`, []any{micros(now), p.ID, keepSession}},
			{`DELETE FROM signin_links WHERE principal_id = ? AND used_at IS NULL`, []any{p.ID}},
		} {
			if _, err := s.w(tx).exec(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Principal{}, fmt.Errorf("set the password of %q: %w", name, err)
	}
	return p, nil
}

// DeletePrincipal deletes the account's principal of that name with its
// bindings and group memberships, revokes its API keys and sign-in
// sessions (at now), and returns it; ErrNotFound.
func (s *Store) DeletePrincipal(ctx context.Context, accountID, name string, now time.Time) (Principal, error) {
	var p Principal
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		p, err = scanPrincipal(s.w(tx).queryRow(ctx, `SELECT `+principalCols+` FROM principals WHERE account_id = ? AND name = ?`, accountID, name))
		if err != nil {
			return notFound(err)
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM bindings WHERE subject_id = ? AND subject_kind <> 'group'`, []any{p.ID}},
			{`DELETE FROM group_members WHERE principal_id = ?`, []any{p.ID}},
			{`UPDATE api_keys SET revoked_at = ?, revoked_by = '' WHERE owner_id = ? AND revoked_at IS NULL`, []any{micros(now), p.ID}},
			{`UPDATE web_sessions SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL`, []any{micros(now), p.ID}},
			{`DELETE FROM principals WHERE id = ?`, []any{p.ID}},
		} {
			if _, err := s.w(tx).exec(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Principal{}, fmt.Errorf("delete principal %q: %w", name, err)
	}
	return p, nil
}

// CreateGroup stores a group; ErrConflict when the name is taken.
func (s *Store) CreateGroup(ctx context.Context, g Group) error {
	if err := s.insert(ctx, `INSERT INTO principal_groups (id, account_id, name, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		g.ID, g.AccountID, g.Name, micros(g.CreatedAt)); err != nil {
		return fmt.Errorf("create group %q: %w", g.Name, err)
	}
	return nil
}

// GetGroup returns the account's group of that name (without members);
// ErrNotFound.
func (s *Store) GetGroup(ctx context.Context, accountID, name string) (Group, error) {
	var g Group
	var created int64
	err := s.r(nil).queryRow(ctx, `SELECT id, account_id, name, created_at FROM principal_groups WHERE account_id = ? AND name = ?`,
		accountID, name).Scan(&g.ID, &g.AccountID, &g.Name, &created)
	if err != nil {
		return Group{}, fmt.Errorf("get group %q: %w", name, notFound(err))
	}
	g.CreatedAt = fromMicros(created)
	return g, nil
}

// ListGroups lists the account's groups with their members, by name.
func (s *Store) ListGroups(ctx context.Context, accountID string) ([]Group, error) {
	rows, err := s.r(nil).query(ctx, `SELECT g.id, g.account_id, g.name, g.created_at, COALESCE(m.principal_id, '')
		FROM principal_groups g LEFT JOIN group_members m ON m.group_id = g.id
		WHERE g.account_id = ? ORDER BY g.name, m.principal_id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		var created int64
		var member string
		if err := rows.Scan(&g.ID, &g.AccountID, &g.Name, &created, &member); err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != g.ID {
			g.CreatedAt = fromMicros(created)
			out = append(out, g)
		}
		if member != "" {
			out[len(out)-1].Members = append(out[len(out)-1].Members, member)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return out, nil
}

// DeleteGroup deletes the account's group of that name with its
// memberships and bindings; ErrNotFound.
func (s *Store) DeleteGroup(ctx context.Context, accountID, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id string
		if err := s.w(tx).queryRow(ctx, `SELECT id FROM principal_groups WHERE account_id = ? AND name = ?`, accountID, name).Scan(&id); err != nil {
			return notFound(err)
		}
		for _, q := range []string{
			`DELETE FROM group_members WHERE group_id = ?`,
			`DELETE FROM bindings WHERE subject_kind = 'group' AND subject_id = ?`,
			`DELETE FROM principal_groups WHERE id = ?`,
		} {
			if _, err := s.w(tx).exec(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete group %q: %w", name, err)
	}
	return nil
}

// SetGroupMember adds (member true) or removes a principal from a group.
// Adding a member twice or removing a non-member changes nothing.
func (s *Store) SetGroupMember(ctx context.Context, groupID, principalID string, member bool) error {
	var err error
	if member {
		_, err = s.w(nil).exec(ctx, `INSERT INTO group_members (group_id, principal_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, groupID, principalID)
	} else {
		_, err = s.w(nil).exec(ctx, `DELETE FROM group_members WHERE group_id = ? AND principal_id = ?`, groupID, principalID)
	}
	if err != nil {
		return fmt.Errorf("group membership: %w", err)
	}
	return nil
}

// GroupsOf returns the IDs of the groups a principal belongs to.
func (s *Store) GroupsOf(ctx context.Context, principalID string) ([]string, error) {
	rows, err := s.r(nil).query(ctx, `SELECT group_id FROM group_members WHERE principal_id = ? ORDER BY group_id`, principalID)
	if err != nil {
		return nil, fmt.Errorf("groups of %s: %w", principalID, err)
	}
	out, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("groups of %s: %w", principalID, err)
	}
	return out, nil
}

// CreateRole stores a custom role; ErrConflict when the name is taken.
func (s *Store) CreateRole(ctx context.Context, r Role) error {
	perms, _ := json.Marshal(r.Permissions)
	if err := s.insert(ctx, `INSERT INTO roles (account_id, name, description, permissions, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		r.AccountID, r.Name, r.Description, string(perms), micros(r.CreatedAt)); err != nil {
		return fmt.Errorf("create role %q: %w", r.Name, err)
	}
	return nil
}

// ListRoles lists the account's custom roles, by name.
func (s *Store) ListRoles(ctx context.Context, accountID string) ([]Role, error) {
	rows, err := s.r(nil).query(ctx, `SELECT account_id, name, description, permissions, created_at FROM roles WHERE account_id = ? ORDER BY name`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	defer rows.Close()
	var out []Role
	for rows.Next() {
		var r Role
		var perms string
		var created int64
		if err := rows.Scan(&r.AccountID, &r.Name, &r.Description, &perms, &created); err != nil {
			return nil, fmt.Errorf("list roles: %w", err)
		}
		if err := json.Unmarshal([]byte(perms), &r.Permissions); err != nil {
			return nil, fmt.Errorf("role %q: permissions: %w", r.Name, err)
		}
		r.CreatedAt = fromMicros(created)
		out = append(out, r)
	}
	return out, rows.Err()
}

// RoleChange is what UpdateRole changes of a role: a nil field stays as
// it is (decided in the same write, so two edits of different fields do
// not undo each other).
type RoleChange struct {
	Description *string
	Permissions []string
	// Add and Remove edit the current permissions inside the same write,
	// so two concurrent edits of the list both take effect.
	Add    []string
	Remove []RoleRemoval
}

// RoleRemoval is one permission asked to be removed (Asked, as given)
// and what it stands for (a "resource:*" stands for several): the role
// must hold at least one of them.
type RoleRemoval struct {
	Asked       string
	Permissions []string
}

// RoleEditError refuses an Add/Remove edit: Missing is a removal the
// role holds none of, or empty when the edit would leave no permission.
type RoleEditError struct {
	Missing string
	Has     []string
}

func (e *RoleEditError) Error() string {
	if e.Missing != "" {
		return fmt.Sprintf("the role has no permission %s (it has %s)", e.Missing, strings.Join(e.Has, ", "))
	}
	return "the edit would leave the role without permissions"
}

// editPermissions is perms with c's removals and additions applied.
func editPermissions(perms []string, c RoleChange) ([]string, error) {
	out := slices.Clone(perms)
	for _, r := range c.Remove {
		n := len(out)
		out = slices.DeleteFunc(out, func(p string) bool { return slices.Contains(r.Permissions, p) })
		if len(out) == n {
			return nil, &RoleEditError{Missing: r.Asked, Has: perms}
		}
	}
	for _, p := range c.Add {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, &RoleEditError{Has: perms}
	}
	return out, nil
}

// UpdateRole changes the account's custom role of that name and returns
// it as it was before and as it is now; ErrNotFound.
func (s *Store) UpdateRole(ctx context.Context, accountID, name string, c RoleChange) (was, now Role, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		var perms string
		var created int64
		// FOR UPDATE (PostgreSQL) holds the row against a concurrent
		// edit between this read and the write; SQLite's writes are
		// serialized anyway.
		q := `SELECT account_id, name, description, permissions, created_at FROM roles WHERE account_id = ? AND name = ?`
		if s.Shared() {
			q += ` FOR UPDATE`
		}
		err := s.w(tx).queryRow(ctx, q, accountID, name).Scan(&was.AccountID, &was.Name, &was.Description, &perms, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(perms), &was.Permissions); err != nil {
			return fmt.Errorf("permissions: %w", err)
		}
		was.CreatedAt = fromMicros(created)
		now = was
		if c.Description != nil {
			now.Description = *c.Description
		}
		if c.Permissions != nil {
			now.Permissions = c.Permissions
		}
		if len(c.Add)+len(c.Remove) > 0 {
			if now.Permissions, err = editPermissions(now.Permissions, c); err != nil {
				return err
			}
		}
		b, _ := json.Marshal(now.Permissions)
		_, err = s.w(tx).exec(ctx, `UPDATE roles SET description = ?, permissions = ? WHERE account_id = ? AND name = ?`,
			now.Description, string(b), accountID, name)
		return err
	})
	if err != nil {
		return Role{}, Role{}, fmt.Errorf("update role %q: %w", name, err)
	}
	return was, now, nil
}

// DeleteRole deletes the account's custom role of that name; ErrNotFound,
// or ErrInUse while a binding uses it.
func (s *Store) DeleteRole(ctx context.Context, accountID, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM bindings WHERE account_id = ? AND role = ?`, accountID, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrInUse
		}
		res, err := s.w(tx).exec(ctx, `DELETE FROM roles WHERE account_id = ? AND name = ?`, accountID, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete role %q: %w", name, err)
	}
	return nil
}

const bindingCols = `id, account_id, role, subject_kind, subject_id, org, project, created_at`

// CreateBinding stores a binding; ErrConflict when the same one exists.
func (s *Store) CreateBinding(ctx context.Context, b Binding) error {
	if err := s.insert(ctx, `INSERT INTO bindings (`+bindingCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		b.ID, b.AccountID, b.Role, b.SubjectKind, b.SubjectID, b.Org, b.Project, micros(b.CreatedAt)); err != nil {
		return fmt.Errorf("create binding of role %q: %w", b.Role, err)
	}
	return nil
}

// DeleteBinding deletes the binding equal to b (ID and time ignored);
// ErrNotFound.
func (s *Store) DeleteBinding(ctx context.Context, b Binding) error {
	res, err := s.w(nil).exec(ctx, `DELETE FROM bindings WHERE account_id = ? AND role = ? AND subject_kind = ? AND subject_id = ? AND org = ? AND project = ?`,
		b.AccountID, b.Role, b.SubjectKind, b.SubjectID, b.Org, b.Project)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete binding of role %q: %w", b.Role, err)
	}
	return nil
}

// ListBindings lists the account's bindings; with subjects, only those of
// these subject IDs (a principal and its groups).
func (s *Store) ListBindings(ctx context.Context, accountID string, subjects ...string) ([]Binding, error) {
	q, args := `SELECT `+bindingCols+` FROM bindings WHERE account_id = ?`, []any{accountID}
	if len(subjects) > 0 {
		q += ` AND subject_id IN (?` + repeat(", ?", len(subjects)-1) + `)`
		for _, id := range subjects {
			args = append(args, id)
		}
	}
	rows, err := s.r(nil).query(ctx, q+` ORDER BY org, project, role, subject_kind, subject_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", err)
	}
	defer rows.Close()
	var out []Binding
	for rows.Next() {
		var b Binding
		var created int64
		if err := rows.Scan(&b.ID, &b.AccountID, &b.Role, &b.SubjectKind, &b.SubjectID, &b.Org, &b.Project, &created); err != nil {
			return nil, fmt.Errorf("list bindings: %w", err)
		}
		b.CreatedAt = fromMicros(created)
		out = append(out, b)
	}
	return out, rows.Err()
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// CreateWebSession stores a sign-in session.
func (s *Store) CreateWebSession(ctx context.Context, ws WebSession) error {
	if err := s.insert(ctx, `INSERT INTO web_sessions (id, account_id, principal_id, hash, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING`,
		ws.ID, ws.AccountID, ws.PrincipalID, ws.Hash, micros(ws.CreatedAt), micros(ws.ExpiresAt)); err != nil {
		return fmt.Errorf("create sign-in session: %w", err)
	}
	return nil
}

// WebSessionByHash returns the session whose token hashes to hash, revoked
// or expired or not; ErrNotFound.
func (s *Store) WebSessionByHash(ctx context.Context, hash string) (WebSession, error) {
	var ws WebSession
	var created, expires int64
	var revoked sql.NullInt64
	err := s.r(nil).queryRow(ctx, `SELECT id, account_id, principal_id, hash, created_at, expires_at, revoked_at FROM web_sessions WHERE hash = ?`, hash).
		Scan(&ws.ID, &ws.AccountID, &ws.PrincipalID, &ws.Hash, &created, &expires, &revoked)
	if err != nil {
		return WebSession{}, fmt.Errorf("look up sign-in session: %w", notFound(err))
	}
	ws.CreatedAt, ws.ExpiresAt, ws.RevokedAt = fromMicros(created), fromMicros(expires), fromNullMicros(revoked)
	return ws, nil
}

// RevokeWebSession marks a session revoked at now (a revoked one keeps its
// first time) and deletes sessions that expired before now.
func (s *Store) RevokeWebSession(ctx context.Context, id string, now time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `UPDATE web_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, micros(now), id); err != nil {
			return err
		}
		_, err := s.w(tx).exec(ctx, `DELETE FROM web_sessions WHERE expires_at < ?`, micros(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke sign-in session: %w", err)
	}
	return nil
}
