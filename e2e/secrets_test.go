package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// The tests of this file read the manager's database files the way someone
// holding a copy of them would (a backup, a stolen disk): task secrets must
// not be there, in any of their common encodings.

// uniqueSecret returns a secret value unique to the test.
func uniqueSecret(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// hashScript prints the SHA-256 of $S and a newline: it shows the task got
// the value without putting the value in the script or the output.
const hashScript = `printf '%s\n' "$S" | sha256sum`

func hashOf(secret string) string {
	h := sha256.Sum256([]byte(secret + "\n"))
	return hex.EncodeToString(h[:])
}

// assertNoSecretInDatabase fails if a form of a secret is in the SQLite
// database files of the data directory (the database, its WAL and shared
// memory file).
func assertNoSecretInDatabase(t *testing.T, dataDir, when string, secrets ...string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "legate.db*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no database files in %s: %v", dataDir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, s := range secrets {
			for _, form := range []string{s, hex.EncodeToString([]byte(s)), base64.StdEncoding.EncodeToString([]byte(s)),
				base64.RawStdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s))} {
				if bytes.Contains(b, []byte(form)) {
					t.Errorf("%s: %s holds %q, a form of the secret %q", when, filepath.Base(f), form, s)
				}
			}
		}
	}
}

// startManagerEnv (re)starts c's manager on addr with the environment env
// and waits until it serves.
func (c *cluster) startManagerEnv(addr string, env []string, extra ...string) {
	t := c.t
	t.Helper()
	args := append([]string{"manager", "--listen", addr, "--data", c.data, "--heartbeat-interval", "500ms"}, extra...)
	c.mgr = start(t, "manager", env, args...)
	c.url = "http://" + addr
	eventually(t, 15*time.Second, "manager serving", func() bool {
		if c.mgr.exited() {
			t.Fatalf("manager exited at start:\n%s", c.mgr.out.String())
		}
		env, err := readEnv(filepath.Join(c.data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

// stopManager stops c's manager with SIGTERM and checks it exits 0.
func (c *cluster) stopManager() {
	c.t.Helper()
	c.mgr.signal(syscall.SIGTERM)
	if code := c.mgr.wait(15 * time.Second); code != 0 {
		c.t.Fatalf("manager exit code %d on SIGTERM", code)
	}
}

// managerRefuses starts a manager on c's data that must exit at once with
// an error saying want.
func (c *cluster) managerRefuses(what string, env []string, want string) {
	c.t.Helper()
	p := start(c.t, "manager "+what, env, "manager", "--listen", freePort(c.t), "--data", c.data)
	if code := p.wait(30 * time.Second); code == 0 {
		c.t.Errorf("%s: the manager exited 0", what)
	}
	if !strings.Contains(p.out.String(), want) {
		c.t.Errorf("%s: output does not say %q:\n%s", what, want, p.out.String())
	}
}

// submitDetached submits a task and returns its ID.
func (c *cluster) submitDetached(args ...string) string {
	c.t.Helper()
	out := c.mustCLI(append([]string{"task", "run", "--detach", "--json"}, args...)...)
	var task protocol.Task
	if err := json.Unmarshal([]byte(out), &task); err != nil {
		c.t.Fatalf("decode task: %v\n%s", err, out)
	}
	return task.ID
}

// waitSucceeded waits for a task to succeed and checks its output holds want.
func (c *cluster) waitSucceeded(id, want string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, "task "+id+" finished", func() bool {
		return protocol.Terminal(c.task(id).Status)
	})
	if got := c.task(id); got.Status != protocol.StatusSucceeded {
		c.t.Fatalf("task %s: %s (%s)", id, got.Status, got.Error)
	}
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, want) {
		c.t.Errorf("task %s output %q, want it to hold %q", id, logs, want)
	}
}

// TestSecretsAreSealedAtRest: with LEGATE_MASTER_KEY, a task that ran and a
// task that waits leave no trace of their secrets in the database files;
// a manager with another key refuses to start and says which key the
// database needs; with the right key the waiting task runs with its secret.
func TestSecretsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	keyA := seal.NewKey()
	envA := []string{seal.EnvMasterKey + "=" + seal.EncodeKey(keyA)}
	c := &cluster{t: t, data: t.TempDir()}
	addr := freePort(t)
	c.startManagerEnv(addr, envA)
	if _, err := os.Stat(filepath.Join(c.data, "master.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("with %s set the manager wrote a key file: %v", seal.EnvMasterKey, err)
	}
	tok := c.token("sealed")
	c.delegate("sealed", "sealed-host", c.seed004Env(tok, "sealed", "")...)

	ran, waiting := uniqueSecret(t, "ran"), uniqueSecret(t, "waiting")
	task, r := c.runJSON("--script", hashScript, "--secret-env", "S="+ran)
	if task.Status != protocol.StatusSucceeded || !strings.Contains(c.mustCLI("task", "logs", task.ID), hashOf(ran)) {
		t.Fatalf("task with a secret: %s %s\n%s", task.Status, task.Error, r.stderr)
	}
	if !strings.Contains(c.mustCLI("task", "get", task.ID), "S") {
		t.Error("task get does not show the secret's name")
	}
	waitingID := c.submitDetached("--selector", "later", "--queue-timeout", "10m", "--script", hashScript, "--secret-env", "S="+waiting)
	assertNoSecretInDatabase(t, c.data, "while the manager runs", ran, waiting)
	c.stopManager()
	assertNoSecretInDatabase(t, c.data, "after the manager stopped", ran, waiting)

	c.managerRefuses("with another key", []string{seal.EnvMasterKey + "=" + seal.EncodeKey(seal.NewKey())},
		"this database was sealed with key "+seal.KeyID(keyA)+"; give this manager the same key (LEGATE_MASTER_KEY or --master-key-file)")
	c.managerRefuses("with a malformed key", []string{seal.EnvMasterKey + "=not-a-key"},
		"LEGATE_MASTER_KEY: key 1: want 32 bytes")

	c.startManagerEnv(addr, envA)
	c.delegate("later", "later-host", c.seed004Env(tok, "later", "later")...)
	c.waitSucceeded(waitingID, hashOf(waiting))
	assertNoSecretInDatabase(t, c.data, "after the waiting task ran", ran, waiting)
}

// keyFileIDs reads the key IDs of a key file, the primary first.
func keyFileIDs(t *testing.T, path string) []string {
	t.Helper()
	r, err := seal.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return r.IDs()
}

// TestMasterKeyFileAndRotation: the manager makes DATA/master.key (0600),
// refuses a key file others can read and a missing one when the database
// is sealed, and rotate-key then rotate-key --drop-old move everything to a
// new key while a delegate keeps running tasks.
func TestMasterKeyFileAndRotation(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	addr := strings.TrimPrefix(c.url, "http://")
	keyFile := filepath.Join(c.data, "master.key")
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("no master key file after the first start: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("master.key mode %04o, want 0600", fi.Mode().Perm())
	}
	ids := keyFileIDs(t, keyFile)
	if len(ids) != 1 {
		t.Fatalf("key file holds %v", ids)
	}
	keyA := ids[0]
	tok := c.token("rot")
	c.delegate("rot", "rot-host", c.seed004Env(tok, "rot", "")...)
	first, later := uniqueSecret(t, "first"), uniqueSecret(t, "later")
	task, _ := c.runJSON("--script", hashScript, "--secret-env", "S="+first)
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task: %s %s", task.Status, task.Error)
	}
	laterID := c.submitDetached("--selector", "later", "--queue-timeout", "10m", "--script", hashScript, "--secret-env", "S="+later)
	// A stored secret, re-sealed by the rotation too.
	stored := uniqueSecret(t, "stored")
	storedFile := filepath.Join(t.TempDir(), "stored")
	if err := os.WriteFile(storedFile, []byte(stored), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("secret", "create", "ROT", "--from-file", storedFile)
	c.stopManager()

	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	c.managerRefuses("with a key file others can read", nil, "chmod 600 "+keyFile)
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(keyFile, keyFile+".bak"); err != nil {
		t.Fatal(err)
	}
	c.managerRefuses("without its key file", nil, "the master key file "+keyFile+" does not exist, but this database was sealed with key "+keyA)
	if _, err := os.Stat(keyFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused manager made a new key file: %v", err)
	}
	if err := os.Rename(keyFile+".bak", keyFile); err != nil {
		t.Fatal(err)
	}

	// Rotate while the manager is stopped, then start it.
	rotate := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"manager", "rotate-key", "--data", c.data}, args...)...)
		cmd.Env = baseEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rotate-key %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := rotate()
	ids = keyFileIDs(t, keyFile)
	if len(ids) != 2 || ids[1] != keyA || !strings.Contains(out, "new primary key "+ids[0]) || !strings.Contains(out, "1 stored secrets") {
		t.Fatalf("after rotate-key the key file holds %v; output:\n%s", ids, out)
	}
	keyB := ids[0]
	// The queued task waits for a delegate that starts only now; a task
	// that no connected delegate could run is ended after one liveness
	// window (3 heartbeats): 1.5 s at the tests' 500 ms was less than a
	// delegate's start on a loaded machine. 5 s heartbeats give it 15 s.
	c.startManagerEnv(addr, nil, "--heartbeat-interval", "5s")
	c.waitConnected("rot-host", "")
	c.delegate("later", "later-host", c.seed004Env(tok, "later", "later")...)
	c.waitSucceeded(laterID, hashOf(later))
	third := uniqueSecret(t, "third")
	if task, _ := c.runJSON("--script", hashScript, "--secret-env", "S="+third); task.Status != protocol.StatusSucceeded {
		t.Fatalf("task after the rotation: %s %s", task.Status, task.Error)
	}

	// Drop the old key while the manager runs; it keeps working after a restart.
	out = rotate("--drop-old")
	if ids := keyFileIDs(t, keyFile); len(ids) != 1 || ids[0] != keyB || !strings.Contains(out, "removed key "+keyA) {
		t.Fatalf("after --drop-old the key file holds %v; output:\n%s", ids, out)
	}
	c.stopManager()
	c.startManagerEnv(addr, nil)
	c.waitConnected("rot-host", "")
	fourth := uniqueSecret(t, "fourth")
	id := c.submitDetached("--script", hashScript, "--secret-env", "S="+fourth, "--selector", "rot-host")
	c.waitSucceeded(id, hashOf(fourth))
	id = c.submitDetached("--script", hashScript, "--env", "S=${secrets.ROT}", "--selector", "rot-host")
	c.waitSucceeded(id, hashOf(stored))
	assertNoSecretInDatabase(t, c.data, "after the rotation", first, later, third, fourth, stored)
}

// TestDevModeSealsTransparently: legate dev makes its key file in its data
// directory; the same key given in LEGATE_MASTER_KEY opens the database, and
// tasks of the dev delegate do not see it.
func TestDevModeSealsTransparently(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freePort(t)
	dev := func(env []string) *cluster {
		t.Helper()
		c := &cluster{t: t, data: data, url: "http://" + addr}
		c.mgr = start(t, "dev", env, "dev", "--data", data, "--listen", addr)
		eventually(t, 20*time.Second, "dev serving with its delegate", func() bool {
			if c.mgr.exited() {
				t.Fatalf("legate dev exited:\n%s", c.mgr.out.String())
			}
			env, err := readEnv(filepath.Join(data, "admin.env"))
			if err != nil || env["LEGATE_API_KEY"] == "" {
				return false
			}
			c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return false
			}
			conn.Close()
			for _, d := range c.delegates() {
				if d.Name == "dev-delegate" && d.Status == protocol.DelegateConnected {
					return true
				}
			}
			return false
		})
		return c
	}
	c := dev(nil)
	keyFile := filepath.Join(data, "master.key")
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("legate dev made no key file: %v", err)
	}
	secret := uniqueSecret(t, "dev")
	if task, r := c.runJSON("--script", hashScript, "--secret-env", "S="+secret); task.Status != protocol.StatusSucceeded {
		t.Fatalf("dev task: %s %s\n%s", task.Status, task.Error, r.stderr)
	}
	c.stopManager()
	assertNoSecretInDatabase(t, data, "legate dev", secret)

	// The key of the file, in the environment instead.
	var key string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			key = f[1]
		}
	}
	c = dev([]string{seal.EnvMasterKey + "=" + key})
	task, r := c.runJSON("--script", `echo "key=${LEGATE_MASTER_KEY:-unset}"`)
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("dev task: %s %s\n%s", task.Status, task.Error, r.stderr)
	}
	if logs := c.mustCLI("task", "logs", task.ID); !strings.Contains(logs, "key=unset") {
		t.Errorf("a dev task sees the master key: %q", logs)
	}
	c.stopManager()

	// With the key file gone, the key in the environment alone opens the
	// database: legate dev re-executes itself without the key in its
	// environment and must still read it.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	c = dev([]string{seal.EnvMasterKey + "=" + key})
	c.stopManager()
}
