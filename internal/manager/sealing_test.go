package manager

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/store"
)

func ringOf(t testing.TB, keys ...byte) *seal.Ring {
	t.Helper()
	var raws [][]byte
	for _, k := range keys {
		raws = append(raws, bytes.Repeat([]byte{k}, seal.KeySize))
	}
	r, err := seal.NewRing(raws[0], raws[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keyedManager runs a manager on the SQLite database in dir with the key
// ring keys, until stop.
type keyedManager struct {
	url   string
	admin identity.Admin
	m     *Manager
	stop  func()
}

func startKeyedManager(t *testing.T, dir string, keys *seal.Ring) *keyedManager {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenWith(ctx, dir+"/legate.db", store.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	admin, err := identity.Bootstrap(ctx, st, dir, url, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ctx, st, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx, ln) }()
	stopped := false
	km := &keyedManager{url: url, admin: admin, m: m}
	km.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager Run: %v", err)
		}
		st.Close()
	}
	t.Cleanup(km.stop)
	return km
}

func (km *keyedManager) client(t testing.TB, secret string) *client.Client {
	t.Helper()
	c, err := client.New(km.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecret(secret)
	return c
}

// TestACopyOfTheDatabaseCannotSignSessions takes the stored session key, as
// someone holding a copy of the database would, and signs sessions with
// every reading of it: the manager refuses them all. The same claims signed
// with the manager's real key are accepted, so the refusal is the key's.
func TestACopyOfTheDatabaseCannotSignSessions(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "del", "host-1")
	// The key the manager signs sessions with, as New loads it.
	sessionKey, err := tm.st.SessionKey(ctx)
	if err != nil {
		t.Fatal(err)
	}

	stored, err := tm.st.SettingOrInit(ctx, "session_key", "")
	if err != nil || stored == "" {
		t.Fatalf("stored session key: %q, %v", stored, err)
	}
	if !seal.IsSealed(stored) {
		t.Errorf("the stored session key is not sealed: %q", stored)
	}
	for _, form := range []string{hex.EncodeToString(sessionKey), base64.StdEncoding.EncodeToString(sessionKey),
		base64.RawURLEncoding.EncodeToString(sessionKey)} {
		if strings.Contains(stored, form) {
			t.Errorf("the stored value holds the session key as %q", form)
		}
	}

	// The claims of the real session, valid for another hour.
	parts := strings.Split(reg.Session, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims sessionClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims.Expires = time.Now().Add(time.Hour).Unix()

	candidates := map[string][]byte{"the stored text": []byte(stored)}
	if i := strings.LastIndexByte(stored, ':'); i > 0 {
		candidates["the stored text after the key ID"] = []byte(stored[i+1:])
		if b, err := base64.RawURLEncoding.DecodeString(stored[i+1:]); err == nil {
			candidates["the decoded box"] = b
			for _, n := range []int{12, 16, 28} {
				if len(b) >= n+32 {
					candidates[fmt.Sprintf("32 bytes of the box from offset %d", n)] = b[n : n+32]
				}
			}
		}
	}
	if b, err := hex.DecodeString(stored); err == nil {
		candidates["the stored text as hex"] = b
	}
	for name, key := range candidates {
		c := tm.client(t, signSession(key, claims))
		_, err := c.RefreshSession(ctx)
		wantCode(t, "session signed with "+name, err, protocol.CodeUnauthenticated)
	}
	if _, err := tm.client(t, signSession(sessionKey, claims)).RefreshSession(ctx); err != nil {
		t.Fatalf("control: the manager's own key is refused: %v", err)
	}
}

// TestDelegateSessionsAndSecretsSurviveARotation: sessions and a queued
// task's secrets made under key A work on a manager that has only key B,
// after the database was re-sealed with B.
func TestDelegateSessionsAndSecretsSurviveARotation(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a := startKeyedManager(t, dir, ringOf(t, 1))
	api := a.client(t, a.admin.APIKey)
	tok, err := api.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := a.client(t, "").Register(ctx, protocol.RegisterRequest{
		ProtocolVersion: protocol.Version, AccountID: a.admin.AccountID, Token: tok.Value, Name: "del", Hostname: "h1", Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	task, err := api.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, SecretEnv: map[string]string{"S": "before-rotation"}})
	if err != nil {
		t.Fatal(err)
	}
	a.stop()

	// The rotation, as legate manager rotate-key does it.
	st, err := store.OpenWith(ctx, dir+"/legate.db", store.Options{Keys: ringOf(t, 2, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := st.Reseal(ctx); err != nil || !rep.SessionKey || rep.Sealed != 1 {
		t.Fatalf("Reseal: %+v, %v", rep, err)
	}
	st.Close()

	b := startKeyedManager(t, dir, ringOf(t, 2))
	d := b.client(t, reg.Session)
	if _, err := d.RefreshSession(ctx); err != nil {
		t.Fatalf("the delegate's session after the rotation: %v", err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil || acq.Spec.SecretEnv["S"] != "before-rotation" {
		t.Fatalf("acquire after the rotation: %+v, %v", acq.Spec.SecretEnv, err)
	}
}

// TestManagerNeedsTheDatabasesKey: a manager with another key does not
// start, and says which key it needs and how to give it.
func TestManagerNeedsTheDatabasesKey(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a := startKeyedManager(t, dir, ringOf(t, 1))
	a.stop()
	st, err := store.OpenWith(ctx, dir+"/legate.db", store.Options{Keys: ringOf(t, 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = New(ctx, st, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	want := "this database was sealed with key " + ringOf(t, 1).Primary() +
		"; give this manager the same key (LEGATE_MASTER_KEY or --master-key-file); it has key " + ringOf(t, 2).Primary()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New with another key: %v\nwant it to say %q", err, want)
	}
}

// TestNewSealsASessionKeyInClear: a database whose session key an older
// version stored in clear gets it sealed, with one info line, once; the
// key is the same, so delegates keep their sessions.
func TestNewSealsASessionKeyInClear(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, dir+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := bytes.Repeat([]byte{0x5a}, 32)
	if _, err := st.SettingOrInit(ctx, "session_key", hex.EncodeToString(old)); err != nil {
		t.Fatal(err)
	}
	for i, wantLine := range []bool{true, false} {
		var logs bytes.Buffer
		_, err := New(ctx, st, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		// The key New loaded (dispatch signs sessions with it).
		if key, err := st.SessionKey(ctx); err != nil || !bytes.Equal(key, old) {
			t.Errorf("start %d: the session key changed", i+1)
		}
		n := strings.Count(logs.String(), "sealed the secrets an older version kept in clear")
		if (n == 1) != wantLine || n > 1 {
			t.Errorf("start %d: %d info lines about sealing, want %v:\n%s", i+1, n, wantLine, logs.String())
		}
	}
	stored, err := st.SettingOrInit(ctx, "session_key", "")
	if err != nil || !seal.IsSealed(stored) {
		t.Errorf("stored session key %q, %v: want it sealed", stored, err)
	}
}

// TestSecretValuesStayOutOfTheQueueAndTheAPI: after a submit, neither the
// queue index nor any API answer about the task holds the secret value;
// only the acquire hands it over, to the winner.
func TestSecretValuesStayOutOfTheQueueAndTheAPI(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	const secret = "queue-and-api-must-not-show-this"
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, SecretEnv: map[string]string{"S": secret}})
	if err != nil {
		t.Fatal(err)
	}
	qt, ok := tm.m.dispatch.QueuedTask(task.ID)
	if !ok {
		t.Fatal("the task is not in the queue index")
	}
	if qt.Spec.SecretEnv != nil || len(qt.SecretNames) != 1 {
		t.Errorf("queue index entry: secret env %v names %v", qt.Spec.SecretEnv, qt.SecretNames)
	}
	// Every admin view of the task, raw.
	for _, path := range []string{protocol.PathTasks + "/" + task.ID, protocol.PathTasks, protocol.PathTasks + "?status=queued",
		protocol.PathTasks + "/" + task.ID + "/explain"} {
		body := rawGet(t, tm.url+path, tm.admin.APIKey)
		if strings.Contains(body, secret) {
			t.Errorf("GET %s shows the secret value", path)
		}
		if path == protocol.PathTasks+"/"+task.ID && !strings.Contains(body, `"secret_env_names":["S"]`) {
			t.Errorf("GET %s does not show the secret's name: %s", path, body)
		}
	}
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "del", "host-1")
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil || acq.Spec.SecretEnv["S"] != secret {
		t.Fatalf("acquire: %v, %v", acq.Spec.SecretEnv, err)
	}
}

func rawGet(t *testing.T, url, key string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// sessionClaims and signSession are dispatch's session format
// (dispatch/session.go), copied to forge sessions: the control of
// TestACopyOfTheDatabaseCannotSignSessions checks that a session they sign
// with the manager's key is accepted.
type sessionClaims struct {
	InstanceID string `json:"i"`
	AccountID  string `json:"a"`
	TokenID    string `json:"t"`
	Generation int64  `json:"g"`
	Expires    int64  `json:"e"` // Unix seconds
}

func signSession(key []byte, c sessionClaims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(p))
	return "s1." + p + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
