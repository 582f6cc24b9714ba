package store

import (
	"context"
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
	if _, err := s.writer.ExecContext(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, payload); err != nil {
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
