package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every store test runs against both backends: SQLite (a file in a temp
// dir) and PostgreSQL (a fresh database per test). The PostgreSQL server is
// the one named by $LEGATE_TEST_POSTGRES (a postgres:// URL whose user may
// create databases), or else one throwaway cluster that this test binary
// starts on a loopback port on first use, from the server binaries of
// Debian's postgresql package (scripts/pg-ensure installs them), and stops
// when the tests end. Without either, the PostgreSQL variants are skipped,
// except under CI=true, where that is a failure.

// envPostgres names a PostgreSQL server to test against instead of a
// throwaway cluster. The test binary also sets it for the processes it
// starts (fuzz workers), so they share its cluster.
const envPostgres = "LEGATE_TEST_POSTGRES"

// backend is a database the store tests run against.
type backend struct {
	name string
	// newDSN returns the DSN of a new, empty database, removed when tb ends.
	newDSN func(tb testing.TB) string
	// rawDriver is the database/sql driver name for opening a DSN of the
	// backend without the store.
	rawDriver string
}

var (
	sqliteBackend = backend{
		name:      "sqlite",
		newDSN:    func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "legate.db") },
		rawDriver: "sqlite",
	}
	postgresBackend = backend{name: "postgres", newDSN: newPostgresDB, rawDriver: "pgx"}
	backends        = []backend{sqliteBackend, postgresBackend}
)

// open opens a store on a new, empty database of the backend.
func (b backend) open(tb testing.TB) *Store {
	tb.Helper()
	return openAt(tb, b.newDSN(tb))
}

// forEachBackend runs f as the parallel subtests "sqlite" and "postgres".
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// --- the PostgreSQL server of the test run -----------------------------------------

// pgServer is the PostgreSQL server of this test binary, set up on first
// use. It is the package's only mutable state, and only tests touch it.
var pgServer struct {
	once    sync.Once
	base    *url.URL // server DSN; a test database replaces its path
	admin   *sql.DB  // creates and drops the test databases
	cluster *cluster // the throwaway cluster, if this process started it
	missing string   // why there is no server (binaries not installed, ...)
	err     error    // why the server could not be set up
}

// TestMain stops the throwaway PostgreSQL cluster, if a test started one.
func TestMain(m *testing.M) {
	code := m.Run()
	if pgServer.admin != nil {
		pgServer.admin.Close()
	}
	if c := pgServer.cluster; c != nil {
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the test PostgreSQL cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// postgresServer returns the server DSN and admin pool, skipping tb (or
// failing it, under CI=true) when PostgreSQL is not available.
func postgresServer(tb testing.TB) (*url.URL, *sql.DB) {
	tb.Helper()
	pgServer.once.Do(setUpPostgres)
	switch {
	case pgServer.err != nil:
		tb.Fatalf("PostgreSQL test server: %v", pgServer.err)
	case pgServer.missing != "" && os.Getenv("CI") == "true":
		tb.Fatalf("PostgreSQL is required under CI=true: %s", pgServer.missing)
	case pgServer.missing != "":
		tb.Skipf("skipping the PostgreSQL variant: %s (install it with scripts/pg-ensure, or set %s to a postgres:// URL)",
			pgServer.missing, envPostgres)
	}
	return pgServer.base, pgServer.admin
}

func setUpPostgres() {
	dsn := os.Getenv(envPostgres)
	if dsn == "" {
		c, missing, err := startCluster()
		if missing != "" || err != nil {
			pgServer.missing, pgServer.err = missing, err
			return
		}
		pgServer.cluster = c
		dsn = c.dsn()
		os.Setenv(envPostgres, dsn) // for fuzz workers
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		pgServer.err = fmt.Errorf("$%s: want a postgres:// URL", envPostgres)
		return
	}
	admin, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = admin.PingContext(ctx)
		cancel()
	}
	if err != nil {
		pgServer.err = fmt.Errorf("connect to the test server: %w", err)
		return
	}
	admin.SetMaxOpenConns(4)
	pgServer.base, pgServer.admin = u, admin
}

// pgAvailable reports whether PostgreSQL can be tested, for tests that
// also do something without it. Under CI=true it must be.
func pgAvailable(tb testing.TB) bool {
	tb.Helper()
	pgServer.once.Do(setUpPostgres)
	if pgServer.missing != "" && pgServer.err == nil && os.Getenv("CI") != "true" {
		tb.Logf("no PostgreSQL: %s", pgServer.missing)
		return false
	}
	return true
}

// newPostgresDB creates a database for one test and returns its DSN. It is
// dropped when tb ends (after the stores opened later are closed).
func newPostgresDB(tb testing.TB) string {
	tb.Helper()
	base, admin := postgresServer(tb)
	var b [8]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	// template0 with C collation: text sorts by bytes, as in SQLite.
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+
		` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	u := *base
	u.Path = "/" + name
	return u.String()
}

// openRaw opens dsn without the store (no migrations), closed when tb ends.
func (b backend) openRaw(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(b.rawDriver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// --- the throwaway cluster ---------------------------------------------------------

// cluster is a PostgreSQL cluster in a temp dir, listening on 127.0.0.1
// only, with trust authentication (it is reachable from this host only, and
// lives as long as the test run).
type cluster struct {
	bin  string // directory of initdb, pg_ctl, postgres
	dir  string // temp dir: data/, the log, the socket
	port int
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// postgresBinDir returns the bin directory of the newest installed
// PostgreSQL server (Debian layout), or "".
func postgresBinDir() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	version := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	slices.SortFunc(matches, func(a, b string) int { return version(a) - version(b) })
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// startCluster initdbs and starts a cluster. PostgreSQL refuses to run as
// root, so as root it runs as the postgres OS user (runuser or su). It
// returns a reason in missing when PostgreSQL is not installed.
func startCluster() (_ *cluster, missing string, err error) {
	bin := postgresBinDir()
	if bin == "" {
		return nil, "no PostgreSQL server installed (/usr/lib/postgresql/*/bin/initdb)", nil
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "running as root and there is no postgres OS user to run PostgreSQL as", nil
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	dir, err := os.MkdirTemp("", "legate-pg-")
	if err != nil {
		return nil, "", err
	}
	c := &cluster{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.logTail())
			c.stop()
		}
	}()
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, "", err
	}
	if err := c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		return nil, "", err
	}
	// A free port can be taken by someone else before the server binds
	// it: try a few.
	for try := 0; ; try++ {
		c.port, err = freeLoopbackPort()
		if err != nil {
			return nil, "", err
		}
		// Durability is not wanted from a throwaway cluster; speed is.
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off"+
			" -c full_page_writes=off -c max_connections=400", c.port, c.dir)
		err = c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-o", opts)
		if err == nil || try == 2 {
			break
		}
	}
	if err != nil {
		return nil, "", err
	}
	c.watchdog()
	return c, "", nil
}

// run runs one of the cluster's programs, as the postgres OS user when
// this process is root.
func (c *cluster) run(prog string, args ...string) error {
	argv := append([]string{filepath.Join(c.bin, prog)}, args...)
	var cmd *exec.Cmd
	switch {
	case os.Geteuid() != 0:
		cmd = exec.Command(argv[0], argv[1:]...)
	case lookPath("runuser"):
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, argv...)...)
	default:
		cmd = exec.Command("su", "-s", "/bin/sh", "postgres", "-c", shellQuote(argv))
	}
	cmd.Dir = c.dir // the package dir may not be readable by postgres
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", prog, err, out)
	}
	return nil
}

// stop stops the server at once (its data is thrown away) and removes
// the directory.
func (c *cluster) stop() error {
	var err error
	if _, statErr := os.Stat(filepath.Join(c.data(), "postmaster.pid")); statErr == nil {
		err = c.run("pg_ctl", "stop", "-D", c.data(), "-m", "immediate", "-w")
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

func (c *cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return ""
	}
	return "\nserver log:\n" + string(b)
}

// watchdog starts a detached shell that stops the cluster and removes its
// directory if this process dies without doing so (a test timeout panics
// and exits without running TestMain's cleanup).
func (c *cluster) watchdog() {
	stop := shellQuote([]string{filepath.Join(c.bin, "pg_ctl"), "stop", "-D", c.data(), "-m", "immediate"})
	if os.Geteuid() == 0 {
		stop = "su -s /bin/sh postgres -c " + shellQuote([]string{stop})
	}
	script := fmt.Sprintf(`while [ -d /proc/%d ]; do sleep 1; done
if [ -d %s ]; then %s >/dev/null 2>&1; rm -rf %s; fi`,
		os.Getpid(), shellQuote([]string{c.dir}), stop, shellQuote([]string{c.dir}))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		cmd.Process.Release()
	}
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// shellQuote quotes args for sh.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
