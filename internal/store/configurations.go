package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Configuration is a delegate configuration: a script the delegates whose
// scope covers its scope and that match all of its selectors run at start
// and whenever it changes.
type Configuration struct {
	AccountID string
	Name      string
	Script    string
	// Selectors are normalized (protocol.NormalizeSelectors).
	Selectors []string
	// Org and Project are its scope, as for tokens: Org "" is account
	// level, Org alone org level, both project level. Set at creation.
	Org, Project string
	// Version is 1 when created and goes up with every update.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ConfigurationUpdate changes a configuration; nil fields are kept.
type ConfigurationUpdate struct {
	Script    *string
	Selectors *[]string
}

// ConfigurationResult is the last configuration run one instance reported.
type ConfigurationResult struct {
	InstanceID    string
	Configuration string
	Version       int64
	// ExitCode is nil when the script did not exit by itself.
	ExitCode    *int
	Error       string
	Output      string
	OutputBytes int64
	StartedAt   time.Time
	FinishedAt  time.Time
	// Org and Project are the scope of the configuration that ran (""
	// for results recorded before results kept it: the account's).
	Org, Project string
}

const configurationCols = `account_id, name, script, selectors, version, created_at, updated_at, org, project`

func scanConfiguration(r rowScanner) (Configuration, error) {
	var c Configuration
	var selectors string
	var created, updated int64
	if err := r.Scan(&c.AccountID, &c.Name, &c.Script, &selectors, &c.Version, &created, &updated, &c.Org, &c.Project); err != nil {
		return Configuration{}, err
	}
	var err error
	if c.Selectors, err = decodeStrings(selectors); err != nil {
		return Configuration{}, fmt.Errorf("configuration %q: %w", c.Name, err)
	}
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	return c, nil
}

// CreateConfiguration creates a configuration at version 1; ErrConflict if
// the account already has one with that name (names are unique in the
// account, whatever the scope).
func (s *Store) CreateConfiguration(ctx context.Context, c Configuration) (Configuration, error) {
	c.Version = 1
	c.UpdatedAt = c.CreatedAt
	c.Script = cleanText(c.Script)
	err := s.insert(ctx, `INSERT INTO configurations (`+configurationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		c.AccountID, c.Name, c.Script, encodeStrings(c.Selectors), c.Version, micros(c.CreatedAt), micros(c.UpdatedAt),
		c.Org, c.Project)
	if err != nil {
		return Configuration{}, fmt.Errorf("create configuration %q: %w", c.Name, err)
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(micros(c.CreatedAt)), fromMicros(micros(c.UpdatedAt))
	return c, nil
}

// ListConfigurations lists an account's configurations by name.
func (s *Store) ListConfigurations(ctx context.Context, accountID string) ([]Configuration, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+configurationCols+` FROM configurations WHERE account_id = ? ORDER BY name`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list configurations: %w", err)
	}
	out, err := scanAll(rows, scanConfiguration)
	if err != nil {
		return nil, fmt.Errorf("list configurations: %w", err)
	}
	return out, nil
}

// GetConfiguration returns a configuration or ErrNotFound.
func (s *Store) GetConfiguration(ctx context.Context, accountID, name string) (Configuration, error) {
	c, err := scanConfiguration(s.r(nil).queryRow(ctx, `SELECT `+configurationCols+` FROM configurations WHERE account_id = ? AND name = ?`,
		accountID, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Configuration{}, fmt.Errorf("get configuration %q: %w", name, err)
	}
	return c, nil
}

// UpdateConfiguration applies u to a configuration, raises its version by
// one and returns the stored result; ErrNotFound if it does not exist.
func (s *Store) UpdateConfiguration(ctx context.Context, accountID, name string, u ConfigurationUpdate, now time.Time) (Configuration, error) {
	var out Configuration
	err := s.write(ctx, func(tx *sql.Tx) error {
		c, err := scanConfiguration(s.w(tx).queryRow(ctx, `SELECT `+configurationCols+` FROM configurations
	WHERE account_id = ? AND name = ?`+s.lockClause("FOR UPDATE"), accountID, name))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if u.Script != nil {
			c.Script = cleanText(*u.Script)
		}
		if u.Selectors != nil {
			c.Selectors = *u.Selectors
		}
		c.Version++
		c.UpdatedAt = fromMicros(micros(now))
		if _, err := s.w(tx).exec(ctx, `UPDATE configurations SET script = ?, selectors = ?, version = ?, updated_at = ?
	WHERE account_id = ? AND name = ?`, c.Script, encodeStrings(c.Selectors), c.Version, micros(c.UpdatedAt), accountID, name); err != nil {
			return err
		}
		out = c
		return nil
	})
	if err != nil {
		return Configuration{}, fmt.Errorf("update configuration %q: %w", name, err)
	}
	return out, nil
}

// DeleteConfiguration deletes a configuration or returns ErrNotFound. The
// results instances reported for it stay (they are history).
func (s *Store) DeleteConfiguration(ctx context.Context, accountID, name string) error {
	res, err := s.w(nil).exec(ctx, `DELETE FROM configurations WHERE account_id = ? AND name = ?`, accountID, name)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete configuration %q: %w", name, err)
	}
	return nil
}

const configurationResultCols = `instance_id, configuration, version, exit_code, error, output, output_bytes, started_at, finished_at, org, project`

func scanConfigurationResult(r rowScanner) (ConfigurationResult, error) {
	var c ConfigurationResult
	var exit sql.NullInt64
	var started, finished int64
	if err := r.Scan(&c.InstanceID, &c.Configuration, &c.Version, &exit, &c.Error, &c.Output, &c.OutputBytes,
		&started, &finished, &c.Org, &c.Project); err != nil {
		return ConfigurationResult{}, err
	}
	c.ExitCode = fromNullInt(exit)
	c.StartedAt = fromMicros(started)
	c.FinishedAt = fromMicros(finished)
	return c, nil
}

// RecordConfigurationResult stores the last configuration run of an
// instance, replacing the one before unless that one finished later (a
// late, reordered report).
func (s *Store) RecordConfigurationResult(ctx context.Context, r ConfigurationResult) error {
	_, err := s.w(nil).exec(ctx, `INSERT INTO configuration_results (`+configurationResultCols+`)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (instance_id) DO UPDATE SET configuration = excluded.configuration, version = excluded.version,
	exit_code = excluded.exit_code, error = excluded.error, output = excluded.output,
	output_bytes = excluded.output_bytes, started_at = excluded.started_at, finished_at = excluded.finished_at,
	org = excluded.org, project = excluded.project
	WHERE configuration_results.finished_at <= excluded.finished_at`,
		r.InstanceID, r.Configuration, r.Version, nullInt(r.ExitCode), cleanText(r.Error), cleanText(r.Output),
		r.OutputBytes, micros(r.StartedAt), micros(r.FinishedAt), r.Org, r.Project)
	if err != nil {
		return fmt.Errorf("record configuration result of instance %s: %w", r.InstanceID, err)
	}
	return nil
}

// ConfigurationResults returns the last configuration run of every
// instance of an account that reported one, by instance ID.
func (s *Store) ConfigurationResults(ctx context.Context, accountID string) (map[string]ConfigurationResult, error) {
	rows, err := s.r(nil).query(ctx, `SELECT r.instance_id, r.configuration, r.version, r.exit_code, r.error, r.output,
	r.output_bytes, r.started_at, r.finished_at, r.org, r.project
	FROM configuration_results r JOIN instances i ON i.id = r.instance_id WHERE i.account_id = ?`, accountID)
	if err != nil {
		return nil, fmt.Errorf("configuration results: %w", err)
	}
	rs, err := scanAll(rows, scanConfigurationResult)
	if err != nil {
		return nil, fmt.Errorf("configuration results: %w", err)
	}
	out := make(map[string]ConfigurationResult, len(rs))
	for _, r := range rs {
		out[r.InstanceID] = r
	}
	return out, nil
}
