package queue

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Store is what the queue signals read.
type Store interface {
	QueueGroups(ctx context.Context, limit int) (groups, totals []store.QueueGroup, err error)
}

// Service answers the queue signals in the API and in /metrics.
type Service struct {
	st  Store
	now func() time.Time

	// The last read, reused for ReadInterval: scrapers, scalers and
	// autoscalers polling at once cost one aggregate, not one each.
	mu             sync.Mutex
	readAt         time.Time
	groups, totals []store.QueueGroup
}

// ReadInterval is how long one read of the store answers for: the signals
// are at most this old, and a manager aggregates the queue at most once
// per interval however many callers poll it.
const ReadInterval = time.Second

// read returns the groups and totals, from the store when the last read is
// older than ReadInterval. Callers meanwhile wait for that one read.
func (s *Service) read(ctx context.Context) (groups, totals []store.QueueGroup, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.readAt.IsZero() && now.Sub(s.readAt) < ReadInterval && !now.Before(s.readAt) {
		return s.groups, s.totals, nil
	}
	groups, totals, err = s.st.QueueGroups(ctx, MaxGroupsRead)
	if err != nil {
		return nil, nil, err
	}
	s.readAt, s.groups, s.totals = now, groups, totals
	return groups, totals, nil
}

// Metric names of the queue signals (docs/elastic.md).
const (
	MetricQueued = "legate_queue_tasks"
	MetricOldest = "legate_queue_oldest_age_seconds"
)

// New builds the service and registers its metrics in reg (nil: none).
func New(st Store, reg *metrics.Registry, now func() time.Time) *Service {
	s := &Service{st: st, now: now}
	if reg != nil {
		reg.Collect(s.collect, metrics.Desc{
			Opts: metrics.Opts{Name: MetricQueued, Help: "Tasks queued, by account and selector set (normalized, comma-separated; at most " +
				fmt.Sprint(MaxSelectorSets) + " sets per account, the rest in \"" + protocol.QueueOtherSelectors + "\")."},
			Type: metrics.TypeGauge, Labels: []string{"account", "selectors"},
		}, metrics.Desc{
			Opts: metrics.Opts{Name: MetricOldest, Help: "How long the longest-waiting queued task of the account and selector set has waited, in seconds."},
			Type: metrics.TypeGauge, Labels: []string{"account", "selectors"},
		})
	}
	return s
}

// Routes is the queue signals' endpoint: task:view at the account, as
// a scaler's API key holds it.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		{Method: "GET", Pattern: protocol.PathQueue, Admin: s.handleQueue, Rule: api.Rule{Perm: access.TaskView, Scope: api.AtAccount}},
	}
}

func (s *Service) handleQueue(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	_, one := q["selectors"]
	var sels []string
	if one {
		for _, v := range q["selectors"] {
			sels = append(sels, strings.Split(v, ",")...)
		}
		if len(sels) > MaxQuerySelectors {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest,
				"selectors: %d given, at most %d: ask for the selector set of one delegate pool (its tags)", len(sels), MaxQuerySelectors)
			return
		}
	}
	groups, totals, err := s.read(r.Context())
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "read the queue: %v", err)
		return
	}
	if one {
		api.WriteJSON(w, http.StatusOK, Signal(groups, acct, sels, s.now()))
		return
	}
	api.WriteJSON(w, http.StatusOK, Summarize(groups, totals, acct, s.now()))
}

// collect adds each account's queue per selector set, read at scrape
// time.
func (s *Service) collect(ctx context.Context, sc *metrics.Scrape) error {
	groups, totals, err := s.read(ctx)
	if err != nil {
		return fmt.Errorf("read the queue signals: %w", err)
	}
	now := s.now()
	accounts := make([]string, 0, len(totals))
	for _, t := range totals {
		accounts = append(accounts, t.AccountID)
	}
	sort.Strings(accounts)
	for _, a := range accounts {
		for _, set := range Summarize(groups, totals, a, now).Sets {
			label := strings.Join(set.Selectors, ",")
			if set.Other {
				label = protocol.QueueOtherSelectors
			}
			sc.Add(MetricQueued, float64(set.Queued), a, label)
			sc.Add(MetricOldest, float64(set.OldestSeconds), a, label)
		}
	}
	return nil
}
