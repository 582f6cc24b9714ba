package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/seal"
)

// Webhooks of pipelines: one per pipeline at most, named by an opaque ID
// (its URL), with a secret the sender signs each delivery with. The
// secret is sealed for its row and leaves the store only through
// WebhookByID, which the manager calls to check a delivery's signature.

// Webhook is a pipeline's webhook: never its secret.
type Webhook struct {
	ID        string
	AccountID string
	// Org, Project and Pipeline name the pipeline it starts.
	Org, Project string
	Pipeline     string
	// PrincipalKind and PrincipalID are who enabled it or last rotated its
	// secret: the runs it starts act as them ("account" and the account's
	// ID for a key of the account itself).
	PrincipalKind string
	PrincipalID   string
	// EnabledBy is that principal as runs show it ("user alice").
	EnabledBy string
	CreatedAt time.Time
	// RotatedAt is when its current secret was set (CreatedAt until a
	// rotation).
	RotatedAt time.Time
	// EnabledVersion is the version of the pipeline when it was enabled
	// or last rotated.
	EnabledVersion int64
	// SuspendedReason, when not empty, says why an edit of the pipeline
	// suspended it (ApplyPipelineSuspending); SuspendedAt is when. A
	// rotation ends the suspension.
	SuspendedReason string
	SuspendedAt     time.Time
}

func webhookSecretContext(id string) string { return "webhook/" + id }

const webhookCols = `id, account_id, org, project, pipeline, principal_kind, principal_id, enabled_by, created_at, rotated_at,
	enabled_version, suspended_reason, suspended_at`

func scanWebhook(r rowScanner, extra ...any) (Webhook, error) {
	var h Webhook
	var created, rotated, suspended int64
	dest := append([]any{&h.ID, &h.AccountID, &h.Org, &h.Project, &h.Pipeline, &h.PrincipalKind, &h.PrincipalID, &h.EnabledBy, &created, &rotated,
		&h.EnabledVersion, &h.SuspendedReason, &suspended}, extra...)
	if err := r.Scan(dest...); err != nil {
		return Webhook{}, err
	}
	h.CreatedAt, h.RotatedAt = fromMicros(created), fromMicros(rotated)
	if suspended != 0 {
		h.SuspendedAt = fromMicros(suspended)
	}
	return h, nil
}

// SetWebhook gives the pipeline of h (which must exist: ErrNotFound) a
// webhook whose deliveries are signed with secret. Without rotate, a
// pipeline that has one already is ErrConflict; with rotate, its webhook
// keeps its ID and gets the new secret and the new principal (one is
// created if there was none) and is no longer suspended. h.ID is the ID of
// a new webhook; the answer is the webhook as stored, with the pipeline's
// version as EnabledVersion.
func (s *Store) SetWebhook(ctx context.Context, h Webhook, secret string, rotate bool, now time.Time) (Webhook, error) {
	now = fromMicros(micros(now))
	var out Webhook
	err := s.write(ctx, func(tx *sql.Tx) error {
		w := s.w(tx)
		// The pipeline's row is held, so a delete waits for this to end
		// (and then takes the webhook with it).
		var version int64
		err := w.queryRow(ctx, `SELECT version FROM pipelines WHERE account_id = ? AND org = ? AND project = ? AND name = ?`+s.lockClause("FOR UPDATE"),
			h.AccountID, h.Org, h.Project, h.Pipeline).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		cur, err := scanWebhook(w.queryRow(ctx, `SELECT `+webhookCols+` FROM pipeline_webhooks
	WHERE account_id = ? AND org = ? AND project = ? AND pipeline = ?`+s.lockClause("FOR UPDATE"), h.AccountID, h.Org, h.Project, h.Pipeline))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = h
			out.CreatedAt, out.RotatedAt, out.EnabledVersion, out.SuspendedReason, out.SuspendedAt = now, now, version, "", time.Time{}
			res, err := w.exec(ctx, `INSERT INTO pipeline_webhooks (`+webhookCols+`, secret) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0, ?) ON CONFLICT DO NOTHING`,
				out.ID, out.AccountID, out.Org, out.Project, out.Pipeline, out.PrincipalKind, out.PrincipalID, out.EnabledBy,
				micros(now), micros(now), version, s.keys.Seal([]byte(secret), webhookSecretContext(out.ID)))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return errors.Join(ErrConflict, err)
			}
			return nil
		case err != nil:
			return err
		case !rotate:
			return ErrConflict
		}
		out = cur
		out.PrincipalKind, out.PrincipalID, out.EnabledBy, out.RotatedAt = h.PrincipalKind, h.PrincipalID, h.EnabledBy, now
		out.EnabledVersion, out.SuspendedReason, out.SuspendedAt = version, "", time.Time{}
		_, err = w.exec(ctx, `UPDATE pipeline_webhooks SET secret = ?, principal_kind = ?, principal_id = ?, enabled_by = ?, rotated_at = ?,
	enabled_version = ?, suspended_reason = '', suspended_at = 0 WHERE id = ?`,
			s.keys.Seal([]byte(secret), webhookSecretContext(cur.ID)), out.PrincipalKind, out.PrincipalID, out.EnabledBy, micros(now), version, cur.ID)
		return err
	})
	if err != nil {
		return Webhook{}, fmt.Errorf("set the webhook of pipeline %s: %w", h.Pipeline, err)
	}
	return out, nil
}

// WebhookOf returns the webhook of a pipeline, or ErrNotFound.
func (s *Store) WebhookOf(ctx context.Context, acct, org, project, pipeline string) (Webhook, error) {
	h, err := scanWebhook(s.r(nil).queryRow(ctx, `SELECT `+webhookCols+` FROM pipeline_webhooks
	WHERE account_id = ? AND org = ? AND project = ? AND pipeline = ?`, acct, org, project, pipeline))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("webhook of pipeline %s: %w", pipeline, err)
	}
	return h, nil
}

// WebhookByID returns a webhook and its secret, or ErrNotFound. A secret
// that does not open is an error wrapping the seal error.
func (s *Store) WebhookByID(ctx context.Context, id string) (Webhook, []byte, error) {
	var sealed string
	h, err := scanWebhook(s.r(nil).queryRow(ctx, `SELECT `+webhookCols+`, secret FROM pipeline_webhooks WHERE id = ?`, id), &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Webhook{}, nil, fmt.Errorf("webhook %s: %w", id, err)
	}
	secret, err := s.keys.Open(sealed, webhookSecretContext(h.ID))
	if err != nil {
		return Webhook{}, nil, fmt.Errorf("webhook %s: open its secret: %w", id, err)
	}
	return h, secret, nil
}

// DeleteWebhook removes a pipeline's webhook, or returns ErrNotFound.
func (s *Store) DeleteWebhook(ctx context.Context, acct, org, project, pipeline string) error {
	res, err := s.w(nil).exec(ctx, `DELETE FROM pipeline_webhooks WHERE account_id = ? AND org = ? AND project = ? AND pipeline = ?`,
		acct, org, project, pipeline)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete the webhook of pipeline %s: %w", pipeline, err)
	}
	return nil
}

// RunOfDelivery returns the run a webhook started for a delivery ID, or
// ErrNotFound.
func (s *Store) RunOfDelivery(ctx context.Context, webhookID, delivery string) (Run, error) {
	var run Run
	err := s.read(ctx, func(tx *sql.Tx) error {
		var id string
		if err := s.r(tx).queryRow(ctx, `SELECT id FROM pipeline_runs WHERE webhook_id = ? AND delivery = ?`, webhookID, delivery).Scan(&id); err != nil {
			return err
		}
		var err error
		run, err = getRun(ctx, s.r(tx), id, "")
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("run of delivery %s: %w", delivery, err)
	}
	return run, nil
}

// ErrTooManyDeliveries: a webhook has as many delivery IDs remembered as
// RememberDelivery may keep for it.
var ErrTooManyDeliveries = errors.New("too many deliveries remembered for the webhook")

// RememberDelivery records that webhook webhookID accepted the delivery
// ID delivery, kept until expires. A delivery ID remembered already is
// ErrConflict; a webhook with max delivery IDs remembered is
// ErrTooManyDeliveries. The delivery IDs of every webhook that expired by
// now are dropped first, so the table holds only the current window.
func (s *Store) RememberDelivery(ctx context.Context, webhookID, delivery string, expires time.Time, max int, now time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		w := s.w(tx)
		if _, err := w.exec(ctx, `DELETE FROM webhook_deliveries WHERE expires_at < ?`, micros(now)); err != nil {
			return err
		}
		var n int
		if err := w.queryRow(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = ?`, webhookID).Scan(&n); err != nil {
			return err
		}
		res, err := w.exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, delivery, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			webhookID, delivery, micros(expires))
		if err != nil {
			return err
		}
		if added, err := res.RowsAffected(); err != nil || added == 0 {
			return errors.Join(ErrConflict, err)
		}
		if n >= max {
			return ErrTooManyDeliveries
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remember delivery %s of webhook %s: %w", delivery, webhookID, err)
	}
	return nil
}

// resealWebhooks re-seals with the primary key every webhook secret that
// another key sealed, resealBatch rows per transaction.
func (s *Store) resealWebhooks(ctx context.Context) (int, error) {
	primary := seal.Prefix(s.keys.Primary())
	total := 0
	for {
		n := 0
		err := s.write(ctx, func(tx *sql.Tx) error {
			n = 0
			rows, err := s.w(tx).query(ctx, `SELECT id, secret FROM pipeline_webhooks WHERE substr(secret, 1, ?) <> ? LIMIT ?`+s.lockClause("FOR UPDATE"),
				prefixLen, primary, resealBatch)
			if err != nil {
				return err
			}
			type row struct{ id, secret string }
			var todo []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.id, &r.secret); err != nil {
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
				v, err := s.keys.Open(r.secret, webhookSecretContext(r.id))
				if err != nil {
					return fmt.Errorf("webhook %s: %w", r.id, err)
				}
				if _, err := s.w(tx).exec(ctx, `UPDATE pipeline_webhooks SET secret = ? WHERE id = ?`,
					s.keys.Seal(v, webhookSecretContext(r.id)), r.id); err != nil {
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
