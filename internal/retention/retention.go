// Package retention deletes what the manager no longer needs to keep:
// tasks (with their logs) and pipeline runs that finished longer ago than
// the retention period. It deletes in bounded batches, one write
// transaction each, with a pause between batches, so the hot path (task
// submission, acquire, results) waits at most for one batch.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Store is what retention needs of the database.
type Store interface {
	DeleteFinishedTasks(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteFinishedRuns(ctx context.Context, before time.Time, limit int) (int, error)
}

// Defaults of Loop's zero fields.
const (
	DefaultBatch = 100
	DefaultEvery = 10 * time.Minute
	DefaultPause = 25 * time.Millisecond
)

// Loop deletes finished tasks and runs older than Age, every Every.
type Loop struct {
	Store Store
	// Age is the retention period: what finished longer ago is deleted.
	// It must be positive.
	Age time.Duration
	// Batch is how many tasks (or runs) one transaction deletes;
	// 0 = DefaultBatch.
	Batch int
	// Every is the time between passes; 0 = DefaultEvery. A pass goes
	// on until nothing old is left.
	Every time.Duration
	// Pause is the time between two batches of a pass, when the writer
	// is free for everything else; 0 = DefaultPause.
	Pause time.Duration
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Run runs a pass at once, then every Every, until ctx ends; it returns
// nil then. A failed pass is logged and tried again at the next one.
func (l *Loop) Run(ctx context.Context) error {
	if l.Age <= 0 {
		return fmt.Errorf("retention: age %s, want > 0", l.Age)
	}
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if tasks, runs, err := l.Pass(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.log().Warn("retention: delete old finished tasks", "err", err, "tasks", tasks, "runs", runs)
		} else if tasks > 0 || runs > 0 {
			l.log().Info("retention: deleted old finished tasks and runs", "tasks", tasks, "runs", runs, "retention", l.Age)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (l *Loop) log() *slog.Logger {
	if l.Log == nil {
		return slog.Default()
	}
	return l.Log
}

// Pass deletes, batch by batch, every task and run that finished before
// now minus Age, and says how many of each it deleted.
func (l *Loop) Pass(ctx context.Context) (tasks, runs int, err error) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	before := now().Add(-l.Age)
	batch := l.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	pause := l.Pause
	if pause <= 0 {
		pause = DefaultPause
	}
	for _, step := range []struct {
		del   func(context.Context, time.Time, int) (int, error)
		count *int
	}{{l.Store.DeleteFinishedTasks, &tasks}, {l.Store.DeleteFinishedRuns, &runs}} {
		for {
			n, err := step.del(ctx, before, batch)
			*step.count += n
			if err != nil {
				return tasks, runs, err
			}
			if n < batch {
				break
			}
			select {
			case <-ctx.Done():
				return tasks, runs, ctx.Err()
			case <-time.After(pause):
			}
		}
	}
	return tasks, runs, nil
}
