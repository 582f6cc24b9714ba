package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Benchmarks of the web UI's pages over loopback HTTP against a manager
// on a real SQLite file, with the sizes: 10,000 delegate
// instances, 100,000 tasks. The figure that matters is the time of one
// page (ns/op).

// uiSession signs a cookie-keeping HTTP client in with a one-time link.
func uiSession(b testing.TB, tm *testManager) *http.Client {
	b.Helper()
	req, _ := http.NewRequest("POST", tm.url+protocol.PathSignInLinks, nil)
	req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var l protocol.SignInLink
	err = json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err = hc.Get(tm.url + l.Path)
	if err != nil {
		b.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf, token := csrfField.FindSubmatch(page), linkTokenField.FindSubmatch(page)
	if csrf == nil || token == nil {
		b.Fatalf("the sign-in link's page: %d\n%s", resp.StatusCode, page)
	}
	form := url.Values{"csrf": {string(csrf[1])}, "token": {string(token[1])}}
	resp, err = hc.PostForm(tm.url+protocol.PathUISignIn, form)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("sign in with the link: %d", resp.StatusCode)
	}
	return hc
}

func getPage(b *testing.B, hc *http.Client, url, want string) {
	resp, err := hc.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
		b.Fatalf("%s: %d\n%.2000s", url, resp.StatusCode, body)
	}
}

// BenchmarkUIDelegatesPage10k: the Delegates page with 1,000 delegates
// of 10 instances each: the first page (50 delegates), a page deep in the
// listing, filtered pages, and a live update (the render a stream sends
// after each change: its first event, on a new stream).
func BenchmarkUIDelegatesPage10k(b *testing.B) {
	tm := startTestManager(b, Config{})
	ctx := context.Background()
	tok, err := tm.client(b, tm.admin.APIKey).CreateToken(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := tm.st.ListTokens(ctx, tm.admin.AccountID)
	if err != nil || len(tokens) != 1 {
		b.Fatal(err, tok.Name)
	}
	now := time.Now()
	parallel(b, 10000, func(i int) error {
		_, err := tm.st.UpsertInstance(ctx, store.Instance{ID: fmt.Sprintf("d_bench%05d", i), AccountID: tm.admin.AccountID,
			IdentityKey: fmt.Sprintf("k%05d", i), Name: fmt.Sprintf("group-%03d", i/10), Hostname: fmt.Sprintf("host-%05d", i),
			Tags: []string{"linux", "bench"}, Version: "dev", TokenID: tokens[0].ID, RegisteredAt: now, LastHeartbeat: &now})
		return err
	})
	hc := uiSession(b, tm)
	for _, p := range []struct{ name, path, want string }{
		{"first", "/delegates", "50 delegates on this page"},
		{"deep", "/delegates?page=group-900", `data-delegate="group-950"`},
		{"name", "/delegates?name=up-12", "10 delegates, 0 of 100 instances connected (filtered)"},
		// The worst case: a live filter nothing matches reads every row.
		{"connected", "/delegates?status=connected", ">0 delegates, 0 of 0 instances connected (filtered)"},
		// One delegate's page: its ten instances, whatever the account holds.
		{"detail", "/delegates/group-512", "host-05129"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				getPage(b, hc, tm.url+p.path, p.want)
			}
		})
	}
	b.Run("update", func(b *testing.B) {
		for range b.N {
			firstEvent(b, hc, tm.url+"/delegates/events?page=group-500", `data-delegate="group-550"`)
		}
	})
}

// firstEvent opens an event stream and reads its first event, which
// must contain want.
func firstEvent(b *testing.B, hc *http.Client, url, want string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var event strings.Builder
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("%s: %v", url, err)
		}
		if line == "\n" && event.Len() > 0 {
			break
		}
		event.WriteString(line)
	}
	if !strings.Contains(event.String(), want) {
		b.Fatalf("%s: %.2000s", url, event.String())
	}
}

// BenchmarkUITasksPage100k: the first Tasks page, a page deep in the
// listing, and a page of one delegate's tasks, with 100,000 tasks.
func BenchmarkUITasksPage100k(b *testing.B) {
	tm := startTestManager(b, Config{})
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	parallel(b, 100000, func(i int) error {
		created := base.Add(time.Duration(i) * time.Millisecond)
		return tm.st.CreateTask(ctx, store.Task{ID: fmt.Sprintf("t_bench%06d", i), AccountID: tm.admin.AccountID,
			Spec:      protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"linux"}},
			TimeoutMS: 60_000, QueueTimeoutMS: 3_600_000, CreatedAt: created, QueueDeadline: created.Add(2 * time.Hour)})
	})
	hc := uiSession(b, tm)
	for _, p := range []struct{ name, path, want string }{
		{"first", "/tasks", "t_bench099999"},
		{"deep", "/tasks?page=t_bench050000", "t_bench049999"},
		{"status", "/tasks?status=queued&page=t_bench050000", "t_bench049999"},
		{"delegate", "/tasks?delegate=nobody", "No task matches"},
		{"selector", "/tasks?selector=linux", "t_bench099999"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				getPage(b, hc, tm.url+p.path, p.want)
			}
		})
	}
}

// parallel runs fn(0..n-1) on 8 goroutines.
func parallel(b *testing.B, n int, fn func(int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
