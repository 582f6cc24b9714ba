package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/legate-dev/legate/internal/backoff"
)

// notifyChannel is the PostgreSQL channel managers talk on.
const notifyChannel = "legate_events"

// Shared reports whether several managers may share this store (and so
// need Broadcast and Listen): true for PostgreSQL, false for SQLite.
func (s *Store) Shared() bool { return s.dialect == dialectPostgres }

// Broadcast sends payload (at most ~7,900 bytes) to every manager sharing
// this store, itself included. On SQLite, which one manager owns, it does
// nothing.
func (s *Store) Broadcast(ctx context.Context, payload string) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	// A write of its own, so that concurrent broadcasts (one per submitted
	// task) share the commit of a group: a transaction that notifies
	// holds the server's notification lock through its commit, WAL flush
	// included, so notifications committed one by one queue behind each
	// other's fsync.
	err := s.writeSingle(ctx, func(tx *sql.Tx) error {
		_, err := s.w(tx).exec(ctx, `SELECT pg_notify(?, ?)`, notifyChannel, payload)
		return err
	})
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	return nil
}

// Listen calls fn with every broadcast payload until ctx ends, on a
// dedicated connection that it re-opens (with jittered backoff) when it
// breaks; broadcasts sent while it is down are lost, so callers must not
// rely on them alone. connected, if not nil, is called each time the
// listener is (re)established. On SQLite it waits for ctx and returns nil.
func (s *Store) Listen(ctx context.Context, fn func(payload string), connected func()) error {
	if s.dialect != dialectPostgres {
		<-ctx.Done()
		return nil
	}
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, fn, connected)
		if ctx.Err() != nil {
			return nil
		}
		_ = err
		if !b.Wait(ctx) {
			return nil
		}
	}
	return nil
}

func (s *Store) listenOnce(ctx context.Context, fn func(string), connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pgConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	if connected != nil {
		connected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
