package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// signInServer serves the identity routes over real HTTP on loopback, as
// the manager does, and returns its URL.
func signInServer(t *testing.T, s *Service, st *store.Store) string {
	t.Helper()
	log := quiet
	s.auditor = &api.Auditor{Store: st, Now: time.Now, Log: log}
	srv := api.NewServer(api.Config{ReadTimeout: time.Minute, WriteTimeout: time.Minute, UnauthenticatedBodies: 128,
		Authenticate: s.Authenticate, Audit: s.auditor, Log: log})
	mux := http.NewServeMux()
	srv.Handle(mux, s.Routes())
	hs := httptest.NewServer(srv.Deadlines(mux))
	t.Cleanup(hs.Close)
	return hs.URL
}

// fromAddr is an HTTP client whose connections come from 127.0.0.n (all
// of 127/8 is loopback), so that a test can be many client addresses.
func fromAddr(t *testing.T, n int) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// answer is the status of one sign-in and its Retry-After.
type answer struct {
	status     int
	retryAfter string
	body       string
}

func post(t *testing.T, hc *http.Client, url, key string, v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return answer{}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return answer{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(body)}
}

// holdHashes makes s's password checks wait until release is closed; each
// that starts sends on the returned channel first.
func holdHashes(s *Service) (started <-chan struct{}, release func()) {
	ch := make(chan struct{}, 1024)
	gate := make(chan struct{})
	s.verify = func(hash, pw string) bool {
		ch <- struct{}{}
		<-gate
		return pw == rightPassword
	}
	var once sync.Once
	return ch, func() { once.Do(func() { close(gate) }) }
}

// attempts sends n sign-ins at once, the i-th as req(i) from client(i),
// and returns how many password checks started and the answers: it waits
// until every attempt has either been answered or is checking its
// password, and only then lets the checks finish. Nothing is timed: a
// refused attempt is answered at once, a counted one waits in its check.
func attempts(t *testing.T, s *Service, url string, n int, client func(int) *http.Client, req func(int) protocol.CreateSessionRequest) (int, map[int]int, []answer) {
	t.Helper()
	started, release := holdHashes(s)
	defer release()
	answers := make(chan answer, n)
	for i := range n {
		go func() { answers <- post(t, client(i), url+protocol.PathSessions, "", req(i)) }()
	}
	checking, all := 0, []answer{}
	for checking+len(all) < n {
		select {
		case <-started:
			checking++
		case a := <-answers:
			all = append(all, a)
		}
	}
	release()
	for len(all) < n {
		all = append(all, <-answers)
	}
	byStatus := map[int]int{}
	for _, a := range all {
		byStatus[a.status]++
	}
	return checking, byStatus, all
}

// rightPassword is the password of the users createUser makes; a test's
// password check stands in for argon2id (quickPasswords) where it counts
// checks rather than tests the hash.
const rightPassword = "correct horse battery"

var rightHash = sync.OnceValue(func() string { return access.HashPassword(rightPassword) })

func quickPasswords(hash, pw string) bool { return pw == rightPassword }

func createUser(t *testing.T, st *store.Store, acct, name string) {
	t.Helper()
	p := store.Principal{ID: api.NewID("u_"), AccountID: acct, Kind: protocol.PrincipalUser, Name: name,
		PasswordHash: rightHash(), CreatedAt: time.Now()}
	if err := st.CreatePrincipal(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// TestSignInCountsEveryAttemptBeforeHashing sends 48 wrong sign-ins at
// once, on one user from many addresses and on many users from one
// address: exactly signInFailures of them are checked (hashed), every
// other is answered 429 with Retry-After without being hashed, and the
// correct password is refused too afterwards (the lockout counted them).
func TestSignInCountsEveryAttemptBeforeHashing(t *testing.T) {
	const n = 48
	for _, tc := range []struct {
		what   string
		client func(i int) int
		user   func(i int) string
	}{
		{"one user, many addresses", func(i int) int { return 2 + i }, func(int) string { return "vera" }},
		{"many users, one address", func(int) int { return 1 }, func(i int) string { return fmt.Sprintf("user%d", i) }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			s, st, admin := newTestService(t, Config{PasswordHashes: 2 * n, Log: quiet})
			url := signInServer(t, s, st)
			createUser(t, st, admin.AccountID, "vera")
			clients := map[int]*http.Client{}
			for i := range n {
				clients[tc.client(i)] = fromAddr(t, tc.client(i))
			}
			checking, byStatus, all := attempts(t, s, url, n, func(i int) *http.Client { return clients[tc.client(i)] },
				func(i int) protocol.CreateSessionRequest {
					return protocol.CreateSessionRequest{User: tc.user(i), Password: "wrong horse battery"}
				})
			if checking != signInFailures || byStatus[http.StatusUnauthorized] != signInFailures || byStatus[http.StatusTooManyRequests] != n-signInFailures {
				t.Fatalf("%d attempts at once: %d passwords checked, answers %v; want %d checked and answered 401, %d answered 429",
					n, checking, byStatus, signInFailures, n-signInFailures)
			}
			for _, a := range all {
				if a.status == http.StatusTooManyRequests && (a.retryAfter == "" || !strings.Contains(a.body, "too many failed sign-ins")) {
					t.Errorf("429 without Retry-After or a message: %+v", a)
				}
			}
			s.verify = quickPasswords
			if a := post(t, clients[tc.client(0)], url+protocol.PathSessions, "", protocol.CreateSessionRequest{User: "vera", Password: rightPassword}); a.status != http.StatusTooManyRequests {
				t.Errorf("the right password after %d wrong ones: %d %s; want 429", n, a.status, a.body)
			}
		})
	}
}

// TestSignInWithLinksCountsEveryAttempt: 48 guessed sign-in links at once
// from one address: signInFailures are looked up and refused 401, the
// others 429.
func TestSignInWithLinksCountsEveryAttempt(t *testing.T) {
	const n = 48
	s, st, _ := newTestService(t, Config{Log: quiet})
	url := signInServer(t, s, st)
	hc := fromAddr(t, 1)
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			answers <- post(t, hc, url+protocol.PathSessions, "", protocol.CreateSessionRequest{Link: fmt.Sprintf("lgl_guess%d", i)})
		}()
	}
	byStatus := map[int]int{}
	for range n {
		byStatus[(<-answers).status]++
	}
	if byStatus[http.StatusUnauthorized] != signInFailures || byStatus[http.StatusTooManyRequests] != n-signInFailures {
		t.Fatalf("%d guessed links at once: %v; want %d answered 401, %d answered 429", n, byStatus, signInFailures, n-signInFailures)
	}
}

// TestPasswordHashesAreBounded: however many sign-ins pass the pacing at
// once (48 users, each from an address of its own), at most
// Config.PasswordHashes passwords are hashed at once; the others are
// answered 429 with Retry-After and are not counted as failures. Setting
// a user's password waits for a slot the same way.
func TestPasswordHashesAreBounded(t *testing.T) {
	const n, slots = 48, 4
	s, st, admin := newTestService(t, Config{PasswordHashes: slots, Log: quiet})
	url := signInServer(t, s, st)
	for i := range n {
		createUser(t, st, admin.AccountID, fmt.Sprintf("user%d", i))
	}
	clients := make([]*http.Client, n)
	for i := range n {
		clients[i] = fromAddr(t, 2+i)
	}
	started, release := holdHashes(s)
	defer release()
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			answers <- post(t, clients[i], url+protocol.PathSessions, "", protocol.CreateSessionRequest{User: fmt.Sprintf("user%d", i), Password: "wrong horse battery"})
		}()
	}
	checking, busy := 0, 0
	for checking+busy < n {
		select {
		case <-started:
			checking++
		case a := <-answers:
			if a.status != http.StatusTooManyRequests || a.retryAfter != "1" || !strings.Contains(a.body, "retry in a second") {
				t.Fatalf("an attempt past the hashing slots: %+v; want 429 with Retry-After: 1", a)
			}
			busy++
		}
	}
	if checking != slots {
		t.Fatalf("%d passwords checked at once; want at most %d", checking, slots)
	}
	// The slots are full: setting a password is refused the same way.
	if a := post(t, http.DefaultClient, url+protocol.PathUsers, admin.APIKey, protocol.CreateUserRequest{Name: "new", Password: rightPassword}); a.status != http.StatusTooManyRequests || a.retryAfter != "1" {
		t.Errorf("creating a user with a password while the hashing slots are full: %+v; want 429", a)
	}
	release()
	for range slots {
		if a := <-answers; a.status != http.StatusUnauthorized {
			t.Errorf("a checked wrong password: %+v; want 401", a)
		}
	}
	// An attempt refused for want of a slot was not counted: the user
	// signs in (its address and name have one failure at most).
	s.verify = quickPasswords
	for i := range n {
		if a := post(t, clients[i], url+protocol.PathSessions, "", protocol.CreateSessionRequest{User: fmt.Sprintf("user%d", i), Password: rightPassword}); a.status != http.StatusCreated {
			t.Fatalf("user%d with the right password after its attempt: %+v; want 201", i, a)
		}
	}
}
