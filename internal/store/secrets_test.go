package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// The tests of this file look at the database the way someone holding a
// copy of it (a backup, a stolen disk) would: every column of every row of
// every table, and for SQLite the raw bytes of the database file and its
// WAL, searched for the secret, its hex and its base64 forms.

// newSecret returns a secret value unique to the test.
func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "s3cr3t-" + hex.EncodeToString(b)
}

// secretForms are the forms of v that must not appear in the database.
func secretForms(v string) []string {
	return []string{
		v,
		hex.EncodeToString([]byte(v)),
		strings.ToUpper(hex.EncodeToString([]byte(v))),
		base64.StdEncoding.EncodeToString([]byte(v)),
		base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)),
		base64.RawURLEncoding.EncodeToString([]byte(v)),
	}
}

// dumpDatabase returns every value of every row of every table of s, as
// text, one value per line.
func dumpDatabase(t testing.TB, s *Store) []byte {
	t.Helper()
	ctx := context.Background()
	q := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if s.dialect == dialectPostgres {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := s.writer.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("found only tables %v", tables)
	}
	var out bytes.Buffer
	for _, table := range tables {
		rows, err := s.writer.QueryContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case []byte:
					out.Write(v)
				default:
					fmt.Fprint(&out, v)
				}
				out.WriteByte('\n')
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out.Bytes()
}

// rawFiles returns the bytes of a SQLite database's file and WAL.
func rawFiles(t testing.TB, dsn string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range []string{dsn, dsn + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		out[path.Base(p)] = b
	}
	return out
}

// assertNowhere fails if a form of a secret is in the database of s (and,
// for SQLite at dsn, in its files).
func assertNowhere(t *testing.T, s *Store, dsn string, secrets ...string) {
	t.Helper()
	where := map[string][]byte{"every column of every table": dumpDatabase(t, s)}
	if s.dialect == dialectSQLite {
		for name, b := range rawFiles(t, dsn) {
			where["the bytes of "+name] = b
		}
	}
	for _, secret := range secrets {
		for _, form := range secretForms(secret) {
			for name, b := range where {
				if bytes.Contains(b, []byte(form)) {
					t.Errorf("%q (a form of the secret %q) is in %s", form, secret, name)
				}
			}
		}
	}
}

// sealedColumn returns a task's secrets and secret_names columns.
func sealedColumn(t testing.TB, s *Store, id string) (secrets, names string) {
	t.Helper()
	if err := s.writer.QueryRowContext(context.Background(), s.rebind(`SELECT secrets, secret_names FROM tasks WHERE id = ?`), id).
		Scan(&secrets, &names); err != nil {
		t.Fatal(err)
	}
	return secrets, names
}

func secretTask(id, name, value string) Task {
	task := newTask(id, "acc1", t0)
	task.Spec.SecretEnv = map[string]string{name: value}
	return task
}

// TestSecretValuesAreSealedAndDroppedWhenTheTaskEnds takes tasks with
// secrets to an end by every path the store has, and then looks for the
// secret in the database.
func TestSecretValuesAreSealedAndDroppedWhenTheTaskEnds(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		s := openAt(t, dsn)
		ctx := context.Background()
		now := at(time.Minute)
		claim := func(t *testing.T, id string) Task {
			t.Helper()
			return mustClaim(t, s, id, "i1", now)
		}
		cases := []struct {
			name   string
			status string
			end    func(t *testing.T, id string) // from queued to an end
		}{
			{"result succeeded", protocol.StatusSucceeded, func(t *testing.T, id string) {
				claim(t, id)
				if _, err := s.CompleteTask(ctx, id, 1, Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0)}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"result failed", protocol.StatusFailed, func(t *testing.T, id string) {
				claim(t, id)
				if _, err := s.CompleteTask(ctx, id, 1, Result{Status: protocol.StatusFailed, ExitCode: ptr(2)}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"result timed out", protocol.StatusTimedOut, func(t *testing.T, id string) {
				claim(t, id)
				if _, err := s.CompleteTask(ctx, id, 1, Result{Status: protocol.StatusTimedOut}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"cancelled while queued", protocol.StatusCancelled, func(t *testing.T, id string) {
				if _, err := s.FinishTask(ctx, "acc1", id, Result{Status: protocol.StatusCancelled}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"cancelled while running", protocol.StatusCancelled, func(t *testing.T, id string) {
				claim(t, id)
				if _, err := s.FinishTask(ctx, "acc1", id, Result{Status: protocol.StatusCancelled}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"queue timeout", protocol.StatusNotAssigned, func(t *testing.T, id string) {
				if _, err := s.FinishTask(ctx, "acc1", id, Result{Status: protocol.StatusNotAssigned, Error: "no delegate"}, now); err != nil {
					t.Fatal(err)
				}
			}},
			{"timeout enforced by the manager", protocol.StatusTimedOut, func(t *testing.T, id string) {
				claim(t, id)
				if err := s.ExtendLeases(ctx, []LeaseExtension{{TaskID: id, Epoch: 1, ExpiresAt: at(24 * time.Hour)}}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.TimeoutRunning(ctx, at(2*time.Hour), 0); err != nil {
					t.Fatal(err)
				}
			}},
			{"lease expired, no retries left", protocol.StatusFailed, func(t *testing.T, id string) {
				claim(t, id)
				if _, err := s.ExpireLeases(ctx, at(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}},
			{"requeue with no retries left", protocol.StatusFailed, func(t *testing.T, id string) {
				claim(t, id)
				if _, requeued, err := s.RequeueTask(ctx, id, 1, "i1", "lost", 0, now); err != nil || requeued {
					t.Fatalf("requeued %v, %v", requeued, err)
				}
			}},
		}
		var secrets []string
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := fmt.Sprintf("t%d", i)
				secret := newSecret(t)
				secrets = append(secrets, secret)
				task := secretTask(id, "API_TOKEN", secret)
				task.Retries = 0
				mustCreate(t, s, task)
				sealed, names := sealedColumn(t, s, id)
				if !strings.HasPrefix(sealed, seal.Prefix(testKeys.Primary())) || names != `["API_TOKEN"]` {
					t.Fatalf("queued: secrets %q names %q, want sealed with %s", sealed, names, testKeys.Primary())
				}
				c.end(t, id)
				got := mustGet(t, s, "acc1", id)
				if got.Status != c.status {
					t.Fatalf("status %s, want %s", got.Status, c.status)
				}
				if sealed, names := sealedColumn(t, s, id); sealed != "" || names != `["API_TOKEN"]` {
					t.Errorf("after the end: secrets %q names %q; want no values, the name kept", sealed, names)
				}
				if diff := cmp.Diff([]string{"API_TOKEN"}, got.SecretNames); diff != "" || got.Spec.SecretEnv != nil {
					t.Errorf("read after the end: names (-want +got):\n%s values %v", diff, got.Spec.SecretEnv)
				}
			})
		}
		// A requeued task keeps its values (it runs again); a queued one
		// holds them sealed.
		kept, queued := newSecret(t), newSecret(t)
		secrets = append(secrets, kept, queued)
		task := secretTask("requeued", "KEPT", kept)
		task.Retries = 1
		mustCreate(t, s, task, secretTask("queued", "QUEUED", queued))
		mustClaim(t, s, "requeued", "i1", now)
		if _, requeued, err := s.RequeueTask(ctx, "requeued", 1, "i1", "lost", 0, now); err != nil || !requeued {
			t.Fatalf("requeue: %v %v", requeued, err)
		}
		again := mustClaim(t, s, "requeued", "i2", now)
		if again.Spec.SecretEnv["KEPT"] != kept {
			t.Errorf("claim after requeue: secret env %v", again.Spec.SecretEnv)
		}
		assertNowhere(t, s, dsn, secrets...)
	})
}

// TestReadsCarryNoSecretValues: only a claim opens the secret values.
func TestReadsCarryNoSecretValues(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, secretTask("t1", "S", "value-1"), secretTask("t2", "S", "value-2"))
	mustClaim(t, s, "t2", "i1", t0)
	reads := map[string]func() ([]Task, error){
		"GetTask": func() ([]Task, error) { t, err := s.GetTask(ctx, "acc1", "t1"); return []Task{t}, err },
		"ListTasks": func() ([]Task, error) {
			return s.ListTasks(ctx, TaskFilter{AccountID: "acc1"})
		},
		"QueuedPage":         func() ([]Task, error) { return s.QueuedPage(ctx, nil, 0) },
		"QueuedPastDeadline": func() ([]Task, error) { return s.QueuedPastDeadline(ctx, at(24*time.Hour), 0) },
		"RunningTasksOf":     func() ([]Task, error) { return s.RunningTasksOf(ctx, "i1") },
	}
	for name, read := range reads {
		tasks, err := read()
		if err != nil || len(tasks) == 0 {
			t.Fatalf("%s: %v, %v", name, tasks, err)
		}
		for _, task := range tasks {
			if task.Spec.SecretEnv != nil || !slices.Equal(task.SecretNames, []string{"S"}) {
				t.Errorf("%s: %s has secret env %v names %v", name, task.ID, task.Spec.SecretEnv, task.SecretNames)
			}
		}
	}
	// The holder's repeated claim (Check refuses it) carries them; a
	// refused claimer's does not.
	held := errors.New("held")
	got, err := s.ClaimTask(ctx, Claim{TaskID: "t2", InstanceID: "i1", Check: func(Task) error { return held }}, t0)
	if !errors.Is(err, held) || got.Spec.SecretEnv["S"] != "value-2" {
		t.Errorf("holder's repeated claim: %v, %v", got.Spec.SecretEnv, err)
	}
	got, err = s.ClaimTask(ctx, Claim{TaskID: "t1", InstanceID: "i9", Check: func(Task) error { return held }}, t0)
	if !errors.Is(err, held) || got.Spec.SecretEnv != nil {
		t.Errorf("refused claim: %v, %v", got.Spec.SecretEnv, err)
	}
}

// TestTamperedSecretsDoNotOpen moves a sealed value to another row and
// alters one, the way someone with write access to the database would:
// the claim fails with an error that says so, and the task stays queued.
func TestTamperedSecretsDoNotOpen(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, secretTask("victim", "S", "victim-secret"), secretTask("mine", "S", "mine"),
			secretTask("altered", "S", "altered-secret"))
		victim, _ := sealedColumn(t, s, "victim")
		altered, _ := sealedColumn(t, s, "altered")
		flipped := []byte(altered)
		if i := len(flipped) - 5; flipped[i] == 'A' { // another base64url digit
			flipped[i] = 'B'
		} else {
			flipped[i] = 'A'
		}
		for id, v := range map[string]string{"mine": victim, "altered": string(flipped)} {
			if _, err := s.writer.ExecContext(ctx, s.rebind(`UPDATE tasks SET secrets = ? WHERE id = ?`), v, id); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"mine", "altered"} {
			_, err := s.ClaimTask(ctx, claimFor(id, "i1"), t0)
			if !errors.Is(err, seal.ErrAuth) || !strings.Contains(err.Error(), "task "+id) ||
				!strings.Contains(err.Error(), "altered, or it was moved from another row") {
				t.Errorf("claim of %s: %v, want a clear authentication error", id, err)
			}
			if got := mustGet(t, s, "acc1", id); got.Status != protocol.StatusQueued {
				t.Errorf("%s is %s after the failed claim, want queued", id, got.Status)
			}
		}
		if got := mustClaim(t, s, "victim", "i1", t0); got.Spec.SecretEnv["S"] != "victim-secret" {
			t.Errorf("victim: %v", got.Spec.SecretEnv)
		}
		// The session key too: moved from a task, or altered.
		if _, err := s.SessionKey(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer.ExecContext(ctx, s.rebind(`UPDATE settings SET value = ? WHERE key = 'session_key'`), victim); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SessionKey(ctx); !errors.Is(err, seal.ErrAuth) {
			t.Errorf("session key moved from a task row: %v", err)
		}
		if err := s.CheckKeys(ctx); !errors.Is(err, seal.ErrAuth) {
			t.Errorf("CheckKeys: %v", err)
		}
	})
}

// TestAnotherKeyDoesNotOpen: a store with another key (another manager's,
// or a copy of the database elsewhere) opens nothing, and says which key it
// needs.
func TestAnotherKeyDoesNotOpen(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		ctx := context.Background()
		s := openAt(t, dsn)
		key, err := s.SessionKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, secretTask("t1", "S", "v"))
		other := openWithKeys(t, dsn, mustRing(t, 9))
		var uk *seal.UnknownKeyError
		if _, err := other.SessionKey(ctx); !errors.As(err, &uk) || uk.ID != testKeys.Primary() {
			t.Errorf("SessionKey with another key: %v", err)
		}
		if err := other.CheckKeys(ctx); !errors.As(err, &uk) {
			t.Errorf("CheckKeys with another key: %v", err)
		}
		if _, err := other.ClaimTask(ctx, claimFor("t1", "i1"), t0); !errors.As(err, &uk) {
			t.Errorf("claim with another key: %v", err)
		}
		// The owner still opens both.
		if again, err := s.SessionKey(ctx); err != nil || !bytes.Equal(again, key) {
			t.Errorf("session key changed: %v", err)
		}
		if got := mustClaim(t, s, "t1", "i1", t0); got.Spec.SecretEnv["S"] != "v" {
			t.Errorf("claim: %v", got.Spec.SecretEnv)
		}
	})
}

func mustRing(t testing.TB, b byte, older ...byte) *seal.Ring {
	t.Helper()
	var raws [][]byte
	for _, o := range older {
		raws = append(raws, bytes.Repeat([]byte{o}, seal.KeySize))
	}
	r, err := seal.NewRing(bytes.Repeat([]byte{b}, seal.KeySize), raws...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSessionKeyIsSealed: the stored session key is sealed, for its
// setting, and reads the same across stores sharing the key.
func TestSessionKeyIsSealed(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		ctx := context.Background()
		s := openAt(t, dsn)
		if err := s.CheckKeys(ctx); err != nil {
			t.Fatalf("CheckKeys on a new database: %v", err)
		}
		key, err := s.SessionKey(ctx)
		if err != nil || len(key) != 32 {
			t.Fatalf("SessionKey: %x, %v", key, err)
		}
		stored, _, err := s.setting(ctx, "session_key")
		if err != nil || !strings.HasPrefix(stored, seal.Prefix(testKeys.Primary())) {
			t.Fatalf("stored session key %q, %v: want it sealed", stored, err)
		}
		for _, form := range []string{hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key)} {
			if bytes.Contains(dumpDatabase(t, s), []byte(form)) {
				t.Errorf("the session key is in the database as %q", form)
			}
		}
		again, err := openAt(t, dsn).SessionKey(ctx)
		if err != nil || !bytes.Equal(again, key) {
			t.Errorf("second store: %x, %v", again, err)
		}
	})
}

// TestRotation seals under key A, rotates to B (A kept), re-seals, drops
// A: everything still opens, and the session key is the same.
func TestRotation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		ctx := context.Background()
		a := mustRing(t, 1)
		sa := openWithKeys(t, dsn, a)
		session, err := sa.SessionKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// More tasks than a batch, so the pass takes several; one running
		// (its values stay), one ended (none).
		n := resealBatch + 30
		want := map[string]string{}
		for i := range n {
			id := fmt.Sprintf("t%04d", i)
			want[id] = "v-" + id
			mustCreate(t, sa, secretTask(id, "S", want[id]))
		}
		plain := newTask("plain", "acc1", t0)
		plain.Spec.SecretEnv = nil
		mustCreate(t, sa, plain) // no secrets: untouched
		mustClaim(t, sa, "t0001", "i1", t0)
		mustClaim(t, sa, "t0002", "i1", t0)
		if _, err := sa.CompleteTask(ctx, "t0002", 1, Result{Status: protocol.StatusSucceeded}, t0); err != nil {
			t.Fatal(err)
		}
		delete(want, "t0002")
		if got, err := sa.SealedKeys(ctx); err != nil || !cmp.Equal(got, map[string]int{a.Primary(): n}) {
			t.Fatalf("SealedKeys before: %v, %v (want %d with key A)", got, err, n)
		}

		ba := mustRing(t, 2, 1)
		sba := openWithKeys(t, dsn, ba)
		rep, err := sba.Reseal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(SealReport{SessionKey: true, Sealed: n - 1}, rep); diff != "" {
			t.Errorf("Reseal (-want +got):\n%s", diff)
		}
		if got, err := sba.SealedKeys(ctx); err != nil || !cmp.Equal(got, map[string]int{ba.Primary(): n}) {
			t.Errorf("SealedKeys after: %v, %v", got, err)
		}
		// Again: nothing left to do.
		if rep, err := sba.Reseal(ctx); err != nil || rep.Changed() {
			t.Errorf("second Reseal: %+v, %v", rep, err)
		}

		// B alone opens everything; A alone opens nothing.
		sb := openWithKeys(t, dsn, mustRing(t, 2))
		if got, err := sb.SessionKey(ctx); err != nil || !bytes.Equal(got, session) {
			t.Errorf("session key after rotation: %v (equal %v)", err, bytes.Equal(got, session))
		}
		for id, v := range want {
			if id == "t0001" {
				continue // running: claimed below by its holder
			}
			if got := mustClaim(t, sb, id, "i2", t0); got.Spec.SecretEnv["S"] != v {
				t.Fatalf("%s after rotation: %v", id, got.Spec.SecretEnv)
			}
		}
		held := errors.New("held")
		if got, err := sb.ClaimTask(ctx, Claim{TaskID: "t0001", InstanceID: "i1", Check: func(Task) error { return held }}, t0); !errors.Is(err, held) || got.Spec.SecretEnv["S"] != "v-t0001" {
			t.Errorf("running task after rotation: %v, %v", got.Spec.SecretEnv, err)
		}
		if _, err := openWithKeys(t, dsn, a).SessionKey(ctx); err == nil {
			t.Error("the old key alone still opens the session key")
		}
	})
}

// TestResealStopsAtAnUnknownKey: a value sealed with a key the ring lacks
// stops a rotation with the key's ID (nothing is lost).
func TestResealStopsAtAnUnknownKey(t *testing.T) {
	t.Parallel()
	dsn := sqliteBackend.newDSN(t)
	ctx := context.Background()
	mustCreate(t, openWithKeys(t, dsn, mustRing(t, 1)), secretTask("t1", "S", "v"))
	_, err := openWithKeys(t, dsn, mustRing(t, 2)).Reseal(ctx)
	var uk *seal.UnknownKeyError
	if !errors.As(err, &uk) || uk.ID != mustRing(t, 1).Primary() {
		t.Fatalf("Reseal: %v", err)
	}
	if got := mustClaim(t, openWithKeys(t, dsn, mustRing(t, 1)), "t1", "i1", t0); got.Spec.SecretEnv["S"] != "v" {
		t.Errorf("after the failed pass: %v", got.Spec.SecretEnv)
	}
}

// TestUpgradeSealsWhatWasInClear builds a database the way the version
// before migration 0006 left it, with a session key and secret values in
// clear, and checks that SealInClear seals them (and drops those of ended
// tasks) so that they leave the database, once.
func TestUpgradeSealsWhatWasInClear(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		dsn := b.newDSN(t)
		old := b.openRaw(t, dsn)
		sessionKey := bytes.Repeat([]byte{0xab}, 32)
		secrets := map[string]string{"queued": newSecret(t), "running": newSecret(t), "done": newSecret(t)}
		stmts := []string{`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`}
		for _, v := range embeddedVersions(t) {
			if v >= "0005" {
				break
			}
			body, err := migrationFS.ReadFile("migrations/" + v + ".sql")
			if err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, string(body), `INSERT INTO schema_migrations (version, applied_at) VALUES ('`+v+`', 1)`)
		}
		stmts = append(stmts, `INSERT INTO settings (key, value) VALUES ('session_key', '`+hex.EncodeToString(sessionKey)+`')`)
		for _, id := range []string{"queued", "running", "done"} {
			spec := newTask(id, "acc1", t0).Spec
			spec.SecretEnv = map[string]string{"TOKEN": secrets[id], "OTHER": "x-" + secrets[id]}
			text, err := encodeSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			status, epoch, instance := map[string]string{"queued": "queued", "running": "running", "done": "succeeded"}[id], 0, ""
			if id != "queued" {
				epoch, instance = 1, "i1"
			}
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO tasks (id, account_id, type, spec, status, exit_code, error, http_result, timeout_ms,
				queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name, delegate_hostname,
				denied_instances, created_at, acquired_at, started_at, finished_at, queue_deadline,
				lease_expires_at, log_bytes, log_omitted)
				VALUES ('%s', 'acc1', 'shell', '%s', '%s', NULL, '', NULL, 1000, 1000, 0, %d, %d, '%s', '', '',
				'[]', 1, 1, NULL, NULL, 2, NULL, 0, 0)`, id, text, status, epoch, epoch, instance))
		}
		for _, q := range stmts {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatalf("build the old database: %v\n%s", err, q)
			}
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := openAt(t, dsn)
		rep, err := s.SealInClear(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(SealReport{SessionKey: true, Sealed: 2, Dropped: 1}, rep); diff != "" {
			t.Errorf("SealInClear (-want +got):\n%s", diff)
		}
		assertNowhere(t, s, dsn, secrets["queued"], secrets["running"], secrets["done"], hex.EncodeToString(sessionKey))
		if got, err := s.SessionKey(ctx); err != nil || !bytes.Equal(got, sessionKey) {
			t.Errorf("session key after the upgrade: %x, %v", got, err)
		}
		for _, id := range []string{"queued", "running", "done"} {
			if got := mustGet(t, s, "acc1", id); !slices.Equal(got.SecretNames, []string{"OTHER", "TOKEN"}) || got.Spec.SecretEnv != nil {
				t.Errorf("%s: names %v values %v", id, got.SecretNames, got.Spec.SecretEnv)
			}
		}
		if got := mustClaim(t, s, "queued", "i2", t0); got.Spec.SecretEnv["TOKEN"] != secrets["queued"] || got.Spec.SecretEnv["OTHER"] != "x-"+secrets["queued"] {
			t.Errorf("queued task's values after the upgrade: %v", got.Spec.SecretEnv)
		}
		// Once per database.
		if rep, err := s.SealInClear(ctx); err != nil || rep.Changed() {
			t.Errorf("second SealInClear: %+v, %v", rep, err)
		}
		if got, err := s.SealedKeys(ctx); err != nil || !cmp.Equal(got, map[string]int{testKeys.Primary(): 3}) {
			t.Errorf("SealedKeys: %v, %v", got, err)
		}
	})
}

// TestSealInClearChecksTheKeyFirst: an upgrade with the wrong key changes
// nothing.
func TestSealInClearChecksTheKeyFirst(t *testing.T) {
	t.Parallel()
	dsn := sqliteBackend.newDSN(t)
	ctx := context.Background()
	s := openWithKeys(t, dsn, mustRing(t, 1))
	if _, err := s.SessionKey(ctx); err != nil {
		t.Fatal(err)
	}
	var uk *seal.UnknownKeyError
	if _, err := openWithKeys(t, dsn, mustRing(t, 2)).SealInClear(ctx); !errors.As(err, &uk) {
		t.Fatalf("SealInClear with another key: %v", err)
	}
	if _, done, _ := s.setting(ctx, sealedInClearSetting); done {
		t.Error("the failed pass was recorded as done")
	}
}
