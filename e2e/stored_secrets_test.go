package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver, to read the database as a copy of it would be read

	"github.com/legate-dev/legate/internal/mask"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// The tests of this file store a secret with legate secret, run a task
// that references it as ${secrets.NAME} on a real delegate, and then look
// for the value (and its base64 forms) everywhere it could have leaked:
// the database (SQLite files with their WAL, or every column of every
// PostgreSQL table), the manager's log, the delegate's log and its
// delegate.log, every answer of the API and the CLI, and the task's
// output.

// secretSpots collects what the test saw: everything the value must not
// be in.
type secretSpots struct {
	seen map[string]*bytes.Buffer
}

func (s *secretSpots) add(where, what string) {
	if s.seen == nil {
		s.seen = map[string]*bytes.Buffer{}
	}
	if s.seen[where] == nil {
		s.seen[where] = &bytes.Buffer{}
	}
	s.seen[where].WriteString(what)
	s.seen[where].WriteByte('\n')
}

// assertAbsent fails if a form of value is in any spot.
func (s *secretSpots) assertAbsent(t *testing.T, value string) {
	t.Helper()
	forms := []string{value, base64.StdEncoding.EncodeToString([]byte(value)), base64.RawStdEncoding.EncodeToString([]byte(value)),
		base64.URLEncoding.EncodeToString([]byte(value)), base64.RawURLEncoding.EncodeToString([]byte(value))}
	for where, b := range s.seen {
		for _, f := range forms {
			if bytes.Contains(b.Bytes(), []byte(f)) {
				t.Errorf("%s holds %q, a form of the secret value", where, f)
			}
		}
	}
}

// cliSeen runs the CLI and records its output.
func (c *cluster) cliSeen(spots *secretSpots, args ...string) string {
	c.t.Helper()
	r := c.cli(args...)
	spots.add("the output of legate "+strings.Join(args, " "), r.stdout+r.stderr)
	if r.code != 0 {
		c.t.Fatalf("legate %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// apiSeen makes one admin request and records the answer.
func (c *cluster) apiSeen(spots *secretSpots, method, path string) string {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	spots.add("the answer to "+method+" "+path, string(b))
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return string(b)
}

// runStoredSecretTask stores value as the secret DB_PASSWORD of org o1 (a
// decoy of the same name at account level), runs a task of o1/p1 that
// uses it in its script and an environment value, and checks the task got
// the value and its output shows it masked. It returns the delegate.
func runStoredSecretTask(t *testing.T, c *cluster, spots *secretSpots, value, decoy string) *proc {
	t.Helper()
	c.cliSeen(spots, "org", "create", "o1")
	c.cliSeen(spots, "project", "create", "--org", "o1", "p1")
	file := filepath.Join(t.TempDir(), "db.pw")
	if err := os.WriteFile(file, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.cliSeen(spots, "secret", "create", "DB_PASSWORD", "--from-file", file, "--org", "o1")
	// --from-stdin, through a real pipe.
	cmd := exec.Command(binary, "secret", "create", "DB_PASSWORD", "--from-stdin")
	cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
	cmd.Stdin = strings.NewReader(decoy)
	out, err := cmd.CombinedOutput()
	spots.add("the output of legate secret create --from-stdin", string(out))
	if err != nil {
		t.Fatalf("secret create --from-stdin: %v\n%s", err, out)
	}

	tok := c.token("sec")
	d := c.delegate("sec", "sec-host", append(c.seed004Env(tok, "sec", ""), "LOGGING_LEVEL=debug")...)
	// The script compares through a hash: the value itself must be in
	// nothing the test submits.
	script := `echo "script=${secrets.DB_PASSWORD}"` + "\n" + `echo "env=$PW"` + "\n" + `printf '%s' "$PW" | base64` + "\n" +
		`printf '%s\n' "$PW" | sha256sum` + "\n" + `echo 'literal=$${secrets.DB_PASSWORD}'`
	run := c.cliSeen(spots, "task", "run", "--org", "o1", "--project", "p1", "--json", "--script", script, "--env", "PW=${secrets.DB_PASSWORD}")
	var task protocol.Task
	if err := json.Unmarshal([]byte(run), &task); err != nil {
		t.Fatalf("task run: %v\n%s", err, run)
	}
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task %s: %s %s", task.ID, task.Status, task.Error)
	}
	logs := c.cliSeen(spots, "task", "logs", task.ID)
	want := "script=" + mask.Replacement + "\nenv=" + mask.Replacement + "\n" + mask.Replacement + "\n" + hashOf(value) + "  -\nliteral=${secrets.DB_PASSWORD}\n"
	if logs != want {
		t.Errorf("task output %q, want %q", logs, want)
	}
	got := c.cliSeen(spots, "task", "get", task.ID)
	if !strings.Contains(got, "${secrets.DB_PASSWORD}") {
		t.Errorf("task get does not show the reference:\n%s", got)
	}
	c.cliSeen(spots, "task", "get", task.ID, "-o", "json")
	c.cliSeen(spots, "task", "list", "-o", "json")
	c.cliSeen(spots, "secret", "list")
	c.cliSeen(spots, "secret", "list", "-o", "json")
	c.cliSeen(spots, "secret", "get", "DB_PASSWORD", "--org", "o1", "-o", "json")
	for _, p := range []string{protocol.PathTasks, protocol.PathTasks + "/" + task.ID, protocol.PathTasks + "/" + task.ID + "/logs",
		protocol.PathSecrets, protocol.PathSecrets + "/DB_PASSWORD?org=o1", protocol.PathSecrets + "/DB_PASSWORD"} {
		c.apiSeen(spots, "GET", p)
	}
	// An update: the next task gets the new value (hash), masked too.
	c.cliSeen(spots, "secret", "update", "DB_PASSWORD", "--org", "o1", "--from-file", file)
	return d
}

// TestStoredSecretNeverLeaksSQLite: the value never appears in the SQLite
// database, its WAL, the logs, the API answers or the task's output.
func TestStoredSecretNeverLeaksSQLite(t *testing.T) {
	t.Parallel()
	c := &cluster{t: t, data: t.TempDir()}
	c.startManagerEnv(freePort(t), nil, "--log-level", "debug")
	value, decoy := uniqueSecret(t, "stored"), uniqueSecret(t, "decoy")
	var spots secretSpots
	d := runStoredSecretTask(t, c, &spots, value, decoy)
	spots.add("the database files while the manager runs", string(readDBFiles(t, c.data)))
	c.stopManager()
	d.signal(os.Interrupt)
	d.wait(30 * time.Second)
	spots.add("the database files after the manager stopped", string(readDBFiles(t, c.data)))
	spots.add("the manager's log", c.mgr.out.String())
	spots.add("the delegate's log", d.out.String())
	dlog, err := os.ReadFile(filepath.Join(d.cmd.Dir, "delegate.log"))
	if err != nil {
		t.Fatalf("delegate.log: %v", err)
	}
	spots.add("delegate.log", string(dlog))
	if !strings.Contains(d.out.String(), "level=DEBUG") || !strings.Contains(c.mgr.out.String(), "secret created") {
		t.Errorf("the logs are not at debug level, or the manager did not log the secret's creation: the test sees less than it should")
	}
	spots.assertAbsent(t, value)
	spots.assertAbsent(t, decoy)
}

// readDBFiles returns the bytes of the SQLite database files of a data
// directory (the database, its WAL and shared memory).
func readDBFiles(t *testing.T, dataDir string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "legate.db*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no database files in %s: %v", dataDir, err)
	}
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestStoredSecretNeverLeaksPostgres: the same on PostgreSQL, where every
// column of every table is read.
func TestStoredSecretNeverLeaksPostgres(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("no PostgreSQL")
	}
	dsn := pgtest.NewDatabase(t)
	key := seal.EnvMasterKey + "=" + seal.EncodeKey(seal.NewKey())
	c := startSharedManager(t, "manager", dsn, []string{key}, "--log-level", "debug")
	value, decoy := uniqueSecret(t, "stored"), uniqueSecret(t, "decoy")
	var spots secretSpots
	d := runStoredSecretTask(t, c, &spots, value, decoy)
	spots.add("every column of every table", dumpPostgres(t, dsn))
	c.stopManager()
	spots.add("the manager's log", c.mgr.out.String())
	spots.add("the delegate's log", d.out.String())
	if dlog, err := os.ReadFile(filepath.Join(d.cmd.Dir, "delegate.log")); err == nil {
		spots.add("delegate.log", string(dlog))
	}
	spots.assertAbsent(t, value)
	spots.assertAbsent(t, decoy)
}

// dumpPostgres returns every value of every row of every table of the
// database, as text.
func dumpPostgres(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
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
	var out strings.Builder
	sawSecrets := false
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM `+table)
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
			if table == "secrets" {
				sawSecrets = true
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					out.Write(b)
				} else {
					fmt.Fprint(&out, v)
				}
				out.WriteByte('\n')
			}
		}
		rows.Close()
	}
	if !sawSecrets {
		t.Errorf("the dump holds no row of the secrets table (tables %v)", tables)
	}
	return out.String()
}
