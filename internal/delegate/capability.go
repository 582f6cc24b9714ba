package delegate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// capabilityTTL is how long a successful local validation is trusted before
// the delegate checks again. Failures are not cached here: the manager
// denies the criteria for this delegate and stops offering such tasks.
const capabilityTTL = 10 * time.Minute

// capabilityChecker validates capabilities from this delegate's position
// in the network and remembers recent successes.
type capabilityChecker struct {
	httpClient *http.Client
	mu         sync.Mutex
	okUntil    map[string]time.Time
	validating *gauge // counts checks in progress; may be nil
}

func newCapabilityChecker(base *http.Client) *capabilityChecker {
	hc := &http.Client{
		Timeout: 10 * time.Second,
		// Any answer counts as reachable: never follow redirects.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if base != nil && base.Transport != nil {
		hc.Transport = base.Transport
	}
	return &capabilityChecker{httpClient: hc, okUntil: map[string]time.Time{}}
}

// check validates every criteria not validated recently, concurrently, and
// returns the fresh results (cached successes are not reported again) and
// whether all criteria are satisfied.
func (c *capabilityChecker) check(ctx context.Context, criteria []string) ([]protocol.CapabilityResult, bool) {
	now := time.Now()
	var todo []string
	c.mu.Lock()
	for _, cr := range criteria {
		if until, ok := c.okUntil[cr]; ok && now.Before(until) {
			continue
		}
		todo = append(todo, cr)
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return nil, true
	}
	defer c.validating.begin()()
	results := make([]protocol.CapabilityResult, len(todo))
	var wg sync.WaitGroup
	for i, cr := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.validate(ctx, cr)
			results[i] = protocol.CapabilityResult{Criteria: cr, OK: err == nil}
			if err != nil {
				results[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	all := true
	c.mu.Lock()
	for _, r := range results {
		if r.OK {
			c.okUntil[r.Criteria] = time.Now().Add(capabilityTTL)
		} else {
			delete(c.okUntil, r.Criteria)
			all = false
		}
	}
	c.mu.Unlock()
	return results, all
}

// validate checks one criteria: "http(s)://…" answers (any status),
// "tcp://host:port" accepts a connection, "binary:NAME" is on PATH.
func (c *capabilityChecker) validate(ctx context.Context, criteria string) error {
	switch {
	case strings.HasPrefix(criteria, "http://"), strings.HasPrefix(criteria, "https://"):
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, criteria, nil)
		if err != nil {
			return fmt.Errorf("invalid URL: %v", err)
		}
		resp, err := c.httpClient.Do(req)
		if err != nil {
			return fmt.Errorf("no HTTP answer: %v", err)
		}
		resp.Body.Close()
		return nil
	case strings.HasPrefix(criteria, "tcp://"):
		u, err := url.Parse(criteria)
		if err != nil || u.Host == "" || u.Port() == "" {
			return fmt.Errorf("invalid tcp capability %q (want tcp://host:port)", criteria)
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return fmt.Errorf("cannot connect: %v", err)
		}
		conn.Close()
		return nil
	case strings.HasPrefix(criteria, "binary:"):
		name := strings.TrimPrefix(criteria, "binary:")
		if name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("invalid binary capability %q", criteria)
		}
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%s not found on PATH", name)
		}
		return nil
	}
	return fmt.Errorf("unknown capability %q (use http://, https://, tcp://host:port or binary:NAME)", criteria)
}
