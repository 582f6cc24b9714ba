package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Opening a SQLite database is serialized among the processes (and the
// Stores of one process) that open it: openSQLite holds an exclusive lock
// on a sibling file, PATH-lock, from creating the database file until its
// migrations are applied.
//
// Why a lock and not a retry. Switching a new database to WAL writes the
// file header: the connection reads it under a shared lock and then
// upgrades. When two connections do that at once, SQLite refuses one of
// them SQLITE_BUSY at once, without waiting the busy timeout, because
// waiting while holding the shared lock could deadlock; so busy_timeout
// cannot help. Retrying the switch on SQLITE_BUSY works as long as the
// retry budget lasts, and the budget is a guess about scheduling. The lock
// makes the switch and the migrations run in one opener at a time by
// construction: the next opener finds the database in WAL mode (which
// needs only a shared lock to read) and every migration recorded. It also
// gives SQLite what PostgreSQL's advisory migration lock gives: one opener
// migrates while the others wait for it as long as their context allows,
// however long the migrations take, instead of failing after the busy
// timeout.
//
// The lock is an advisory whole-file lock (flock) on its own file. It does
// not touch the database file, whose POSIX locks belong to SQLite (closing
// any descriptor of the database file would drop the locks of every
// connection of this process on it). Processes that do not take it (an
// older legate, the sqlite3 shell) are not serialized, but only a first
// open of a new database can be refused this way.

// openLockSuffix names the lock file: the database path with this suffix,
// in the style of SQLite's own -wal and -shm files.
const openLockSuffix = "-lock"

// openLockPoll bounds the pause between two attempts to take the lock.
const openLockPoll = 50 * time.Millisecond

// lockOpen takes the open lock of the database at path, waiting as long as
// ctx allows, and returns its release.
func lockOpen(ctx context.Context, path string) (unlock func(), err error) {
	name := path + openLockSuffix
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	pause := time.Millisecond
	for {
		err := tryLockFile(f)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, errLocked) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for %s (another process is opening the database): %w", name, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, openLockPoll)
	}
}

// errLocked is tryLockFile's answer when another holder has the lock.
var errLocked = errors.New("locked by another opener")
