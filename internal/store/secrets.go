package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// Secret values at rest. The database never holds a secret in clear: a
// task's secret_env values are one sealed value (package seal) in the
// secrets column, bound to the task's ID, and the session key is sealed in
// the settings table, bound to its name; the key ring comes from outside
// (Options.Keys). Values leave the store only through ClaimTask, and a task
// loses them when it ends (updateTask). Rows written by a version before
// migration 0006 keep their values in the spec column, in clear, until
// SealInClear (at the manager's first start) or Reseal seals them.

// sessionKeySetting is the settings key of the session-signing key.
const sessionKeySetting = "session_key"

// sealedInClearSetting records that SealInClear went through the database.
const sealedInClearSetting = "secrets_sealed_at_rest"

// sessionKeySize is the size of a new session key in bytes.
const sessionKeySize = 32

// resealBatch is how many task rows one transaction of a sealing pass
// reads and changes.
const resealBatch = 500

// secretsContext binds a task's sealed values to the task.
func secretsContext(taskID string) string { return "task/" + taskID + "/secret_env" }

// settingContext binds a sealed setting to its name.
func settingContext(key string) string { return "setting/" + key }

// storedSecrets are a task row's secret values as stored: sealed, or in
// clear in the spec of a row from before migration 0006.
type storedSecrets struct {
	sealed string
	clear  map[string]string
	// bindings are the task's secret bindings as stored (JSON; '' for a
	// task from before migration 0021).
	bindings string
}

// sealSecrets seals a task's secret values ("" for none).
func (s *Store) sealSecrets(taskID string, values map[string]string) (string, error) {
	if len(values) == 0 {
		return "", nil
	}
	b, err := json.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("encode secret values: %w", err)
	}
	return s.keys.Seal(b, secretsContext(taskID)), nil
}

// openSecrets returns a task's secret values (nil for none).
func (s *Store) openSecrets(taskID string, ss storedSecrets) (map[string]string, error) {
	if ss.sealed == "" {
		return ss.clear, nil
	}
	b, err := s.keys.Open(ss.sealed, secretsContext(taskID))
	if err != nil {
		return nil, fmt.Errorf("open the secret values of task %s: %w", taskID, err)
	}
	var values map[string]string
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("decode the secret values of task %s: %w", taskID, err)
	}
	return values, nil
}

// getTaskSecretsForUpdate is getTaskForUpdate that also reads the task's
// stored secret values.
func getTaskSecretsForUpdate(ctx context.Context, h handle, id string) (Task, storedSecrets, error) {
	t, ss, err := scanTaskSecrets(h.queryRow(ctx, `SELECT `+taskSecretCols+` FROM tasks WHERE id = ?`+h.s.lockClause("FOR UPDATE"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ss, ErrNotFound
	}
	return t, ss, err
}

// getTaskSecretsForClaim is getTaskSecretsForUpdate that also takes the
// claims lock of instanceID in the same statement (PostgreSQL only). The
// lock serializes the claims of one instance until the transaction ends,
// so that ClaimTask's capacity count (a later statement) sees every claim
// of the instance committed before it and none can commit meanwhile. An
// advisory lock, not a row lock on the instance: the instance row need not
// exist, and heartbeat flushes (which update instance rows) must not queue
// behind claims. On SQLite the single writer serializes all claims
// already.
func getTaskSecretsForClaim(ctx context.Context, h handle, id, instanceID string) (Task, storedSecrets, error) {
	t, ss, err := scanTaskSecrets(h.queryRow(ctx, `SELECT `+taskSecretCols+` FROM tasks
	WHERE id = ? AND pg_advisory_xact_lock(?, hashtext(?)) IS NOT NULL FOR UPDATE`, id, advisoryClaims, instanceID))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ss, ErrNotFound
	}
	return t, ss, err
}

// --- the session key -------------------------------------------------------------

// SessionKey returns the key that signs delegate sessions, shared by every
// manager of the database: made (random, sealed) on first use, and sealed
// if an older version left it in clear. It fails with an error wrapping
// *seal.UnknownKeyError when the key was sealed with a key the ring lacks,
// and seal.ErrAuth when the stored value does not authenticate.
func (s *Store) SessionKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, sessionKeySize)
	_, _ = rand.Read(fresh)
	stored, err := s.SettingOrInit(ctx, sessionKeySetting, s.keys.Seal(fresh, settingContext(sessionKeySetting)))
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	key, _, err := s.sessionKey(ctx, stored)
	return key, err
}

// sessionKey opens the stored session key, sealing it under the primary
// key first if it is in clear (resealed says so).
func (s *Store) sessionKey(ctx context.Context, stored string) (key []byte, resealed bool, err error) {
	if seal.IsSealed(stored) {
		key, err := s.keys.Open(stored, settingContext(sessionKeySetting))
		if err != nil {
			return nil, false, fmt.Errorf("session key: %w", err)
		}
		return key, false, nil
	}
	// In clear: hex, as versions before 0006 stored it.
	key, err = hex.DecodeString(stored)
	if err != nil || len(key) < 16 {
		return nil, false, errors.New("session key: the stored value is neither sealed nor a key in clear")
	}
	if err := s.replaceSetting(ctx, sessionKeySetting, stored, s.keys.Seal(key, settingContext(sessionKeySetting))); err != nil {
		return nil, false, fmt.Errorf("session key: seal: %w", err)
	}
	return key, true, nil
}

// replaceSetting sets key to value if it still holds old (another manager
// may have changed it meanwhile: then its value stands).
func (s *Store) replaceSetting(ctx context.Context, key, old, value string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.w(tx).exec(ctx, `UPDATE settings SET value = ? WHERE key = ? AND value = ?`, value, key, old)
		return err
	})
}

// setting returns the value stored under key; ok is false if there is none.
func (s *Store) setting(ctx context.Context, key string) (value string, ok bool, err error) {
	err = s.r(nil).queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("setting %s: %w", key, err)
	}
	return value, true, nil
}

// CheckKeys reports whether the ring opens what the database holds sealed,
// before anything is sealed with it: nil for a database that holds nothing
// sealed yet. The session key is the witness (it is sealed first and with
// every rotation), so the check is one read. A database sealed with a key
// the ring lacks gives an error wrapping *seal.UnknownKeyError.
func (s *Store) CheckKeys(ctx context.Context) error {
	v, ok, err := s.setting(ctx, sessionKeySetting)
	if err != nil || !ok || !seal.IsSealed(v) {
		return err
	}
	if _, err := s.keys.Open(v, settingContext(sessionKeySetting)); err != nil {
		return fmt.Errorf("session key: %w", err)
	}
	return nil
}

// --- sealing passes --------------------------------------------------------------

// SealReport says what a sealing pass changed.
type SealReport struct {
	// SessionKey is true when the session key was sealed (it was in clear)
	// or re-sealed with the primary key.
	SessionKey bool
	// Sealed counts the tasks whose secret values were sealed (they were
	// in clear) or re-sealed with the primary key.
	Sealed int
	// Dropped counts the ended tasks whose secret values were dropped.
	Dropped int
	// Secrets counts the stored secrets (legate secret) re-sealed with the
	// primary key.
	Secrets int
	// Webhooks counts the pipeline webhooks whose secrets were re-sealed
	// with the primary key.
	Webhooks int
}

// Changed reports whether the pass changed anything.
func (r SealReport) Changed() bool {
	return r.SessionKey || r.Sealed > 0 || r.Dropped > 0 || r.Secrets > 0 || r.Webhooks > 0
}

// SealInClear seals what a version before migration 0006 left in clear:
// the session key and the secret values of queued and running tasks; ended
// tasks lose theirs instead. It goes through the database once (a setting
// records that it did; later calls cost one read), in batches of 500 rows,
// each its own transaction; it is idempotent and safe while other managers
// run it or use the database. On SQLite it overwrites the freed space of
// the rows it changes and truncates the WAL afterwards, so the values in
// clear leave the database file (not the backups taken before).
func (s *Store) SealInClear(ctx context.Context) (SealReport, error) {
	if _, done, err := s.setting(ctx, sealedInClearSetting); err != nil || done {
		return SealReport{}, err
	}
	if err := s.CheckKeys(ctx); err != nil {
		return SealReport{}, err
	}
	var rep SealReport
	err := s.wipingFreedSpace(ctx, func() error {
		if v, ok, err := s.setting(ctx, sessionKeySetting); err != nil {
			return err
		} else if ok && !seal.IsSealed(v) {
			if _, rep.SessionKey, err = s.sessionKey(ctx, v); err != nil {
				return err
			}
		}
		return s.walkSecrets(ctx, false, &rep)
	})
	if err != nil {
		return rep, fmt.Errorf("seal secret values in clear: %w", err)
	}
	if _, err := s.SettingOrInit(ctx, sealedInClearSetting, strconv.FormatInt(micros(time.Now()), 10)); err != nil {
		return rep, err
	}
	return rep, nil
}

// Reseal seals every secret value the database holds with the ring's
// primary key: values in clear, and values sealed with the ring's other
// keys (a rotation). Ended tasks lose their values. A value sealed with a
// key the ring lacks stops it with an error wrapping *seal.UnknownKeyError
// (what was done stays done: run it again with the key). It works in
// batches of 500 rows, each its own transaction, while managers run.
func (s *Store) Reseal(ctx context.Context) (SealReport, error) {
	var rep SealReport
	v, ok, err := s.setting(ctx, sessionKeySetting)
	if err != nil {
		return rep, err
	}
	if ok && (!seal.IsSealed(v) || !hasPrefix(v, seal.Prefix(s.keys.Primary()))) {
		key, _, err := s.sessionKey(ctx, v)
		if err != nil {
			return rep, err
		}
		if seal.IsSealed(v) {
			if err := s.replaceSetting(ctx, sessionKeySetting, v, s.keys.Seal(key, settingContext(sessionKeySetting))); err != nil {
				return rep, fmt.Errorf("session key: re-seal: %w", err)
			}
		}
		rep.SessionKey = true
	}
	if err := s.walkSecrets(ctx, true, &rep); err != nil {
		return rep, fmt.Errorf("re-seal secret values: %w", err)
	}
	n, err := s.resealSecretObjects(ctx)
	rep.Secrets = n
	if err != nil {
		return rep, fmt.Errorf("re-seal stored secrets: %w", err)
	}
	n, err = s.resealWebhooks(ctx)
	rep.Webhooks = n
	if err != nil {
		return rep, fmt.Errorf("re-seal webhook secrets: %w", err)
	}
	return rep, nil
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// prefixLen is the length of seal.Prefix(id): "v1:" + 12 hex digits + ":".
var prefixLen = len(seal.Prefix("000000000000"))

// walkSecrets goes through the task rows that hold secret values in clear
// (all), sealed with another key than the primary (if rekey), or that
// ended with values still stored, in ID order, resealBatch rows per
// transaction.
func (s *Store) walkSecrets(ctx context.Context, rekey bool, rep *SealReport) error {
	other := "" // with rekey: the primary's prefix, so rows of other keys match
	if rekey {
		other = seal.Prefix(s.keys.Primary())
	}
	after := ""
	for {
		var n int
		var last string
		var batch SealReport
		err := s.write(ctx, func(tx *sql.Tx) error {
			n, last, batch = 0, "", SealReport{}
			rows, err := s.w(tx).query(ctx, `SELECT id, status, CASE WHEN spec LIKE '%"secret_env":%' THEN spec ELSE '' END, secrets
	FROM tasks WHERE id > ? AND (spec LIKE '%"secret_env":%'
	    OR (secrets <> '' AND (status NOT IN (?, ?) OR (? <> '' AND substr(secrets, 1, ?) <> ?))))
	ORDER BY id LIMIT ?`+s.lockClause("FOR UPDATE"),
				after, protocol.StatusQueued, protocol.StatusRunning, other, prefixLen, other, resealBatch)
			if err != nil {
				return err
			}
			type row struct{ id, status, spec, sealed string }
			var todo []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.id, &r.status, &r.spec, &r.sealed); err != nil {
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
				n, last = n+1, r.id
				if err := s.resealRow(ctx, tx, r.id, r.status, r.spec, r.sealed, &batch); err != nil {
					return fmt.Errorf("task %s: %w", r.id, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		rep.Sealed += batch.Sealed
		rep.Dropped += batch.Dropped
		if n < resealBatch {
			return nil
		}
		after = last
	}
}

// resealRow brings one task row to its sealed form: values of an ended
// task dropped; others sealed with the primary key, out of the spec.
func (s *Store) resealRow(ctx context.Context, tx *sql.Tx, id, status, specText, sealed string, rep *SealReport) error {
	ss := storedSecrets{sealed: sealed}
	var spec protocol.TaskSpec
	legacy := false
	if specText != "" {
		var err error
		if spec, err = decodeSpec(specText); err != nil {
			return err
		}
		legacy = len(spec.SecretEnv) > 0
		ss.clear = spec.SecretEnv
	}
	if !legacy && sealed == "" {
		return nil // the spec only mentions "secret_env" (in an env name, say)
	}
	ended := protocol.Terminal(status)
	var values map[string]string
	if !ended {
		var err error
		if values, err = s.openSecrets(id, ss); err != nil {
			return err
		}
		if legacy && sealed != "" { // both: cannot happen; the sealed values win
			legacy = false
		}
	}
	newSealed, err := s.sealSecrets(id, values)
	if err != nil {
		return err
	}
	if legacy {
		names := Task{Spec: spec}.WithoutSecretValues().SecretNames
		spec.SecretEnv = nil
		text, err := encodeSpec(spec)
		if err != nil {
			return err
		}
		var oldNames string
		if err := s.w(tx).queryRow(ctx, `SELECT secret_names FROM tasks WHERE id = ?`, id).Scan(&oldNames); err != nil {
			return err
		}
		if prev, err := decodeStrings(oldNames); err == nil {
			for _, n := range prev {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
			slices.Sort(names)
		}
		if _, err := s.w(tx).exec(ctx, `UPDATE tasks SET spec = ?, secret_names = ?, secrets = ? WHERE id = ?`,
			text, encodeStrings(names), newSealed, id); err != nil {
			return err
		}
	} else if _, err := s.w(tx).exec(ctx, `UPDATE tasks SET secrets = ? WHERE id = ?`, newSealed, id); err != nil {
		return err
	}
	if ended {
		rep.Dropped++
	} else {
		rep.Sealed++
	}
	return nil
}

// SealedKeys counts the values the database holds per key that sealed
// them (the session key, each task's secret values and each stored secret
// count one each);
// values in clear count under "". What a rotation checks before it drops
// the old keys: a full read of the tasks table's secret columns.
func (s *Store) SealedKeys(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	count := func(v string) {
		if !seal.IsSealed(v) {
			out[""]++
			return
		}
		id, err := seal.SealedKeyID(v)
		if err != nil {
			id = "malformed"
		}
		out[id]++
	}
	if v, ok, err := s.setting(ctx, sessionKeySetting); err != nil {
		return nil, err
	} else if ok {
		count(v)
	}
	rows, err := s.r(nil).query(ctx, `SELECT substr(secrets, 1, ?), COUNT(*) FROM tasks WHERE secrets <> '' GROUP BY 1
	UNION ALL SELECT substr(value, 1, ?), COUNT(*) FROM secrets GROUP BY 1
	UNION ALL SELECT substr(secret, 1, ?), COUNT(*) FROM pipeline_webhooks GROUP BY 1`, prefixLen, prefixLen, prefixLen)
	if err != nil {
		return nil, fmt.Errorf("count sealed values: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var prefix string
		var n int
		if err := rows.Scan(&prefix, &n); err != nil {
			return nil, fmt.Errorf("count sealed values: %w", err)
		}
		id, err := seal.SealedKeyID(prefix + "x")
		if err != nil {
			id = "malformed"
		}
		out[id] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count sealed values: %w", err)
	}
	var clear int
	if err := s.r(nil).queryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE secrets = '' AND spec LIKE '%"secret_env":{"%'`).Scan(&clear); err != nil {
		return nil, fmt.Errorf("count values in clear: %w", err)
	}
	if clear > 0 {
		out[""] += clear
	}
	return out, nil
}

// wipingFreedSpace runs fn with SQLite's secure_delete on for the writer
// (what fn's changes free is overwritten with zeros) and then truncates the
// WAL, so old values leave the database file. PostgreSQL keeps old row
// versions until VACUUM; there it just runs fn.
func (s *Store) wipingFreedSpace(ctx context.Context, fn func() error) error {
	if s.dialect != dialectSQLite {
		return fn()
	}
	if _, err := s.writer.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return fmt.Errorf("secure_delete: %w", err)
	}
	err := fn()
	_, offErr := s.writer.ExecContext(context.WithoutCancel(ctx), `PRAGMA secure_delete = OFF`)
	if err != nil {
		return err
	}
	if offErr != nil {
		return fmt.Errorf("secure_delete: %w", offErr)
	}
	if _, err := s.writer.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
