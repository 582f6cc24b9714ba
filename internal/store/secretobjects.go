package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/secretref"
)

// Secrets as objects: named values at account, org or project scope that
// tasks reference (${secrets.NAME}, package secretref). A value is sealed
// for its row (account, scope and name) and leaves the store only through
// SecretValues, which the manager calls when it hands a task to the
// delegate that acquired it; every other read returns metadata.

// Secret is a stored secret's metadata: never its value.
type Secret struct {
	AccountID string
	// ID tells this secret from one deleted and created again under the
	// same name and scope (random, made by CreateSecret).
	ID string
	// Org and Project are its scope, as for tokens: Org "" is account
	// level, Org alone org level, both project level.
	Org, Project string
	Name         string
	// Version is 1 when created and goes up with every update.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// secretValueContext binds a sealed value to its row.
func secretValueContext(acct, org, project, name string) string {
	return "secret/" + acct + "/" + org + "/" + project + "/" + name
}

const secretCols = `account_id, org, project, name, version, created_at, updated_at, id`

func scanSecret(r rowScanner) (Secret, error) {
	var s Secret
	var created, updated int64
	if err := r.Scan(&s.AccountID, &s.Org, &s.Project, &s.Name, &s.Version, &created, &updated, &s.ID); err != nil {
		return Secret{}, err
	}
	s.CreatedAt, s.UpdatedAt = fromMicros(created), fromMicros(updated)
	return s, nil
}

// CreateSecret stores a new secret at version 1, its value sealed;
// ErrConflict if its scope already has one with that name.
func (s *Store) CreateSecret(ctx context.Context, sec Secret, value string) (Secret, error) {
	sec.Version = 1
	sec.ID = "sec_" + rand.Text()
	sec.CreatedAt = fromMicros(micros(sec.CreatedAt))
	sec.UpdatedAt = sec.CreatedAt
	sealed := s.keys.Seal([]byte(value), secretValueContext(sec.AccountID, sec.Org, sec.Project, sec.Name))
	err := s.insert(ctx, `INSERT INTO secrets (`+secretCols+`, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		sec.AccountID, sec.Org, sec.Project, sec.Name, sec.Version, micros(sec.CreatedAt), micros(sec.UpdatedAt), sec.ID, sealed)
	if err != nil {
		return Secret{}, fmt.Errorf("create secret %s: %w", sec.Name, err)
	}
	return sec, nil
}

// UpdateSecret replaces a secret's value, raises its version and returns
// its metadata; ErrNotFound if it does not exist.
func (s *Store) UpdateSecret(ctx context.Context, acct, org, project, name, value string, now time.Time) (Secret, error) {
	var out Secret
	err := s.write(ctx, func(tx *sql.Tx) error {
		sec, err := scanSecret(s.w(tx).queryRow(ctx, `SELECT `+secretCols+` FROM secrets
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`+s.lockClause("FOR UPDATE"), acct, org, project, name))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		sec.Version++
		sec.UpdatedAt = fromMicros(micros(now))
		sealed := s.keys.Seal([]byte(value), secretValueContext(acct, org, project, name))
		if _, err := s.w(tx).exec(ctx, `UPDATE secrets SET value = ?, version = ?, updated_at = ?
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
			sealed, sec.Version, micros(sec.UpdatedAt), acct, org, project, name); err != nil {
			return err
		}
		out = sec
		return nil
	})
	if err != nil {
		return Secret{}, fmt.Errorf("update secret %s: %w", name, err)
	}
	return out, nil
}

// GetSecret returns a secret's metadata or ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, acct, org, project, name string) (Secret, error) {
	sec, err := scanSecret(s.r(nil).queryRow(ctx, `SELECT `+secretCols+` FROM secrets
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`, acct, org, project, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Secret{}, fmt.Errorf("get secret %s: %w", name, err)
	}
	return sec, nil
}

// ListSecrets lists an account's secrets (metadata) by scope and name.
func (s *Store) ListSecrets(ctx context.Context, acct string) ([]Secret, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+secretCols+` FROM secrets WHERE account_id = ? ORDER BY org, project, name`, acct)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out, err := scanAll(rows, scanSecret)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret deletes a secret or returns ErrNotFound. On SQLite the
// space its sealed value took is overwritten.
func (s *Store) DeleteSecret(ctx context.Context, acct, org, project, name string) error {
	res, err := s.w(nil).exec(ctx, `DELETE FROM secrets WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
		acct, org, project, name)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// lookupScopes are the scopes a task at org/project takes secrets from,
// closest first: its project, its org, the account.
func lookupScopes(org, project string) [][2]string {
	switch {
	case org == "":
		return [][2]string{{"", ""}}
	case project == "":
		return [][2]string{{org, ""}, {"", ""}}
	}
	return [][2]string{{org, project}, {org, ""}, {"", ""}}
}

// FindSecrets returns, for each of names, the secret a task at org/project
// would use: its project's, else its org's, else the account's. Names
// found nowhere are left out.
func (s *Store) FindSecrets(ctx context.Context, acct, org, project string, names []string) (map[string]Secret, error) {
	out := map[string]Secret{}
	if len(names) == 0 {
		return out, nil
	}
	found, err := s.lookupSecrets(ctx, acct, org, project, names, false)
	if err != nil {
		return nil, err
	}
	for n, f := range found {
		out[n] = f.Secret
	}
	return out, nil
}

// SecretValues returns the values of names as a task at org/project sees
// them (closest scope first), opened with the store's keys, and the names
// found nowhere. A value that does not open is an error wrapping the seal
// package's error.
func (s *Store) SecretValues(ctx context.Context, acct, org, project string, names []string) (map[string]string, []string, error) {
	return s.secretValuesIn(ctx, s.r(nil), acct, org, project, names)
}

func (s *Store) secretValuesIn(ctx context.Context, h handle, acct, org, project string, names []string) (map[string]string, []string, error) {
	found, err := lookupSecretsIn(ctx, h, acct, org, project, names, true)
	if err != nil {
		return nil, nil, err
	}
	values := make(map[string]string, len(found))
	var missing []string
	for _, n := range names {
		f, ok := found[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		b, err := s.keys.Open(f.sealed, secretValueContext(acct, f.Org, f.Project, n))
		if err != nil {
			return nil, nil, fmt.Errorf("open secret %s (%s): %w", n, scopeText(f.Org, f.Project), err)
		}
		values[n] = string(b)
	}
	return values, missing, nil
}

type foundSecret struct {
	Secret
	sealed string
}

func (s *Store) lookupSecrets(ctx context.Context, acct, org, project string, names []string, withValues bool) (map[string]foundSecret, error) {
	return lookupSecretsIn(ctx, s.r(nil), acct, org, project, names, withValues)
}

func lookupSecretsIn(ctx context.Context, h handle, acct, org, project string, names []string, withValues bool) (map[string]foundSecret, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	all, err := secretsAtScopes(ctx, h, acct, org, project)
	if err != nil {
		return nil, err
	}
	scopes := lookupScopes(org, project)
	out := map[string]foundSecret{}
	rank := map[string]int{}
	for key, f := range all {
		if !want[f.Name] {
			continue
		}
		r := slices.Index(scopes, [2]string{key.org, key.project})
		if prev, ok := rank[f.Name]; ok && prev <= r {
			continue
		}
		if !withValues {
			f.sealed = ""
		}
		rank[f.Name] = r
		out[f.Name] = f
	}
	return out, nil
}

// scopedName is a secret's place: its scope and name.
type scopedName struct{ org, project, name string }

// secretsAtScopes reads every secret of the account at one of the scopes a
// task at org/project takes secrets from (a handful of rows), with their
// sealed values, in one query.
func secretsAtScopes(ctx context.Context, h handle, acct, org, project string) (map[scopedName]foundSecret, error) {
	rows, err := h.query(ctx, `SELECT `+secretCols+`, value FROM secrets
	WHERE account_id = ? AND ((org = '' AND project = '') OR (org = ? AND project = '') OR (org = ? AND project = ?))`,
		acct, org, org, project)
	if err != nil {
		return nil, fmt.Errorf("look up secrets: %w", err)
	}
	defer rows.Close()
	scopes := lookupScopes(org, project)
	out := map[scopedName]foundSecret{}
	for rows.Next() {
		var f foundSecret
		var created, updated int64
		if err := rows.Scan(&f.AccountID, &f.Org, &f.Project, &f.Name, &f.Version, &created, &updated, &f.ID, &f.sealed); err != nil {
			return nil, fmt.Errorf("look up secrets: %w", err)
		}
		if !slices.Contains(scopes, [2]string{f.Org, f.Project}) {
			continue // org '' with a project: not a scope
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromMicros(updated)
		out[scopedName{f.Org, f.Project, f.Name}] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up secrets: %w", err)
	}
	return out, nil
}

// SecretBinding is what a name a task references means: the exact
// secret it resolved to when the task was created (scope, ID, version).
// A claim hands out that secret's value and nothing else.
type SecretBinding struct {
	Name    string `json:"name"`
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// BindingOf is the binding of a name to sec.
func BindingOf(sec Secret) SecretBinding {
	return SecretBinding{Name: sec.Name, Org: sec.Org, Project: sec.Project, ID: sec.ID, Version: sec.Version}
}

func encodeBindings(b []SecretBinding) string {
	if b == nil {
		b = []SecretBinding{}
	}
	out, err := json.Marshal(b)
	if err != nil { // cannot happen for these fields
		panic(err)
	}
	return string(out)
}

// MissingSecretsError reports references of a task whose bound secret is
// not there any more as it was when the task was created (deleted,
// deleted and created again, updated), or that were never bound (a task
// from before migration 0021): the claim fails the task with it.
type MissingSecretsError struct {
	// Names are the names whose secret is missing, in order.
	Names []string
	msg   string
}

func (e *MissingSecretsError) Error() string { return e.msg }

// referencedSecrets returns the values of the stored secrets t's spec
// references (nil for none), read in the claim's transaction: exactly
// the secrets bound (the JSON of SecretBinding) when t was created, each
// at the version it was bound at. A name is never looked up again here,
// so a secret created, deleted or changed at another scope after the
// task was created changes nothing of what it gets.
func (s *Store) referencedSecrets(ctx context.Context, h handle, t Task, bound string) (map[string]string, error) {
	if !secretref.Uses(t.Spec) {
		return nil, nil
	}
	names, err := secretref.SpecNames(t.Spec)
	if err != nil {
		// Checked when the task was created, by a version that checked
		// less: it ends rather than wait for a claim that cannot succeed.
		return nil, &MissingSecretsError{msg: fmt.Sprintf("the task's secret references: %v; submit it again", err)}
	}
	if len(names) == 0 {
		return nil, nil // escapes only
	}
	var bindings []SecretBinding
	if bound != "" {
		if err := json.Unmarshal([]byte(bound), &bindings); err != nil {
			return nil, fmt.Errorf("task %s: decode its secret bindings: %w", t.ID, err)
		}
	}
	byName := map[string]SecretBinding{}
	for _, b := range bindings {
		byName[b.Name] = b
	}
	found, err := secretsAtScopes(ctx, h, t.AccountID, t.Spec.Org, t.Spec.Project)
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(names))
	var missing, problems []string
	for _, n := range names {
		b, ok := byName[n]
		if !ok {
			missing = append(missing, n)
			problems = append(problems, fmt.Sprintf("secret %s was never bound to the task: it was queued before this version of the manager bound a task's secrets when it is submitted; submit the task again", n))
			continue
		}
		what := "secret " + n + " (" + scopeText(b.Org, b.Project) + ")"
		f, ok := found[scopedName{b.Org, b.Project, n}]
		switch {
		case !ok:
			problems = append(problems, what+" was deleted after the task was submitted; create it again (legate secret create) and run the task again")
		case f.ID != b.ID:
			problems = append(problems, what+" was deleted and created again after the task was submitted; run the task again to use the new one")
		case f.Version != b.Version:
			problems = append(problems, fmt.Sprintf("%s was updated after the task was submitted (it was checked at version %d, it is at version %d now); run the task again to use the new value",
				what, b.Version, f.Version))
		default:
			v, err := s.keys.Open(f.sealed, secretValueContext(t.AccountID, f.Org, f.Project, n))
			if err != nil {
				return nil, fmt.Errorf("open secret %s (%s): %w", n, scopeText(f.Org, f.Project), err)
			}
			values[n] = string(v)
			continue
		}
		missing = append(missing, n)
	}
	if len(problems) > 0 {
		return nil, &MissingSecretsError{Names: missing, msg: strings.Join(problems, "; ")}
	}
	return values, nil
}

// scopeText names a scope in messages.
func scopeText(org, project string) string {
	switch {
	case org == "":
		return "account scope"
	case project == "":
		return "org " + org
	}
	return "project " + org + "/" + project
}

// resealSecretObjects re-seals with the primary key every secret whose
// value another key sealed, resealBatch rows per transaction.
func (s *Store) resealSecretObjects(ctx context.Context) (int, error) {
	primary := seal.Prefix(s.keys.Primary())
	total := 0
	for {
		n := 0
		err := s.write(ctx, func(tx *sql.Tx) error {
			n = 0
			rows, err := s.w(tx).query(ctx, `SELECT account_id, org, project, name, value FROM secrets
	WHERE substr(value, 1, ?) <> ? LIMIT ?`+s.lockClause("FOR UPDATE"), prefixLen, primary, resealBatch)
			if err != nil {
				return err
			}
			type row struct{ acct, org, project, name, value string }
			var todo []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.acct, &r.org, &r.project, &r.name, &r.value); err != nil {
					rows.Close()
					return err
				}
				todo = append(todo, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, r := range todo {
				c := secretValueContext(r.acct, r.org, r.project, r.name)
				v, err := s.keys.Open(r.value, c)
				if err != nil {
					return fmt.Errorf("secret %s (%s): %w", r.name, scopeText(r.org, r.project), err)
				}
				if _, err := s.w(tx).exec(ctx, `UPDATE secrets SET value = ? WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
					s.keys.Seal(v, c), r.acct, r.org, r.project, r.name); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < resealBatch {
			return total, nil
		}
	}
}
