package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

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
// and exits without running Main's cleanup).
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
