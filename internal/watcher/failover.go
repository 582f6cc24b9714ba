package watcher

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/legate-dev/legate/internal/protocol"
)

// Failover returns a Manager that asks ms in turn: each call goes to the
// one that answered last, and on to the next when that one cannot be
// reached or is unavailable, once around (the managers of one database, as
// MANAGER_HOST_AND_PORT lists them). An answer that a manager gives on
// purpose (a refused token, say) is returned as it is, except that a
// release one manager does not hold (each holds its own release directory)
// is asked of the others. A download goes on to the next manager only if
// nothing was written yet.
func Failover(ms ...Manager) Manager {
	if len(ms) == 1 {
		return ms[0]
	}
	return &failover{ms: ms}
}

type failover struct {
	mu  sync.Mutex
	ms  []Manager
	cur int
}

// try calls f with each manager from the current one until one answers or
// an error says another would not do better (next returns false).
func (f *failover) try(ctx context.Context, next func(error) bool, call func(Manager) error) error {
	f.mu.Lock()
	start := f.cur
	f.mu.Unlock()
	var err error
	for i := range f.ms {
		n := (start + i) % len(f.ms)
		if err = call(f.ms[n]); err == nil {
			f.mu.Lock()
			f.cur = n
			f.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil || !next(err) {
			return err
		}
	}
	return err
}

// unreachable: the manager was not reached, or says it cannot serve now.
func unreachable(err error) bool {
	var pe *protocol.Error
	return !errors.As(err, &pe) || pe.Code.Recoverable()
}

// unreachableOrMissing: also a release this manager does not hold.
func unreachableOrMissing(err error) bool {
	var pe *protocol.Error
	return unreachable(err) || (errors.As(err, &pe) && pe.Code == protocol.CodeNotFound)
}

func (f *failover) UpgradeCheck(ctx context.Context, accountID, token string, req protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error) {
	var resp protocol.UpgradeCheckResponse
	err := f.try(ctx, unreachable, func(m Manager) error {
		var err error
		resp, err = m.UpgradeCheck(ctx, accountID, token, req)
		return err
	})
	return resp, err
}

func (f *failover) ReleaseSignature(ctx context.Context, accountID, token, binary, version, goos, goarch string) ([]byte, error) {
	var sig []byte
	err := f.try(ctx, unreachableOrMissing, func(m Manager) error {
		var err error
		sig, err = m.ReleaseSignature(ctx, accountID, token, binary, version, goos, goarch)
		return err
	})
	return sig, err
}

func (f *failover) DownloadRelease(ctx context.Context, accountID, token, binary, version, goos, goarch string, w io.Writer, limit int64) (int64, error) {
	cw := &countingWriter{w: w}
	var n int64
	err := f.try(ctx, func(err error) bool { return cw.n == 0 && unreachableOrMissing(err) }, func(m Manager) error {
		var err error
		n, err = m.DownloadRelease(ctx, accountID, token, binary, version, goos, goarch, cw, limit)
		return err
	})
	return n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
