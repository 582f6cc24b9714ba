package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The audit log: api.Auditor records one event per audited request (see
// package api); this file answers its listing and prunes it.

// auditPage is the largest page GET PathAudit answers.
const auditPage = 1000

func (s *Service) handleListAudit(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	f := store.AuditFilter{AccountID: acct, Principal: strings.TrimSpace(q.Get("user")), Limit: 100}
	if v := strings.TrimSpace(q.Get("since")); v != "" {
		since, err := api.ParseSince(v, s.cfg.Now())
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		f.Since = since
	}
	if v := strings.TrimSpace(q.Get("resource")); v != "" {
		f.ResourceType, f.Resource, _ = strings.Cut(v, "/")
	}
	if v := strings.TrimSpace(q.Get("action")); v != "" {
		exact, prefix, err := parseAuditAction(v)
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		f.Action, f.ActionPrefix = exact, prefix
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditPage {
			api.BadRequest(w, "limit=%q: use a number from 1 to %d", v, auditPage)
			return
		}
		f.Limit = n
	}
	if v := q.Get("after"); v != "" {
		c, err := parseAuditCursor(v)
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		f.After = &c
	}
	// One more than the page says whether there is a next one.
	want := f.Limit
	f.Limit++
	es, err := s.st.ListAuditEvents(r.Context(), f)
	if err != nil {
		api.StoreError(w, err, "audit log")
		return
	}
	out := protocol.AuditList{Events: make([]protocol.AuditEvent, 0, min(len(es), want))}
	for i, e := range es {
		if i == want {
			last := es[i-1]
			out.Next = strconv.FormatInt(last.At.UnixMicro(), 10) + "_" + last.ID
			break
		}
		out.Events = append(out.Events, e.Event())
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// parseAuditAction reads the action filter of GET PathAudit: an action,
// which keeps it and the actions beneath it (task.cancel; task keeps
// task.create, task.cancel, ...), or the start of actions when it ends
// with "." or "*" (task. and task.* keep task.create, task.cancel, ...).
func parseAuditAction(s string) (exact, prefix string, err error) {
	name, star := strings.CutSuffix(s, "*")
	if len(name) > 100 || strings.ContainsFunc(name, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '_' && r != '-'
	}) || (star && name == "") {
		return "", "", fmt.Errorf("action=%q: use an action (task.cancel; task for every task action) or the start of actions ending with . or * (task.): lowercase letters, digits, '.', '_' and '-'", s)
	}
	if star || strings.HasSuffix(name, ".") {
		return "", name, nil
	}
	return name, "", nil
}

func parseAuditCursor(s string) (store.AuditCursor, error) {
	at, id, ok := strings.Cut(s, "_")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return store.AuditCursor{}, errors.New("after=" + strconv.Quote(s) + ": not a cursor this manager gave (use the next field of the previous page)")
	}
	return store.AuditCursor{At: time.UnixMicro(us), ID: id}, nil
}

// auditPruneBatch bounds one pruning transaction of the audit log.
const auditPruneBatch = 5000

// auditPruneMaxBatches bounds the transactions of one pruning pass; what
// is left waits for the next pass.
const auditPruneMaxBatches = 25

// PruneAudit removes the audit records older than Config.AuditRetention,
// in batches (a no-op when the log is kept forever); the manager's prune
// loop calls it. It returns how many it removed.
func (s *Service) PruneAudit(ctx context.Context, now time.Time) int {
	if s.cfg.AuditRetention < 0 {
		return 0
	}
	total := 0
	for range auditPruneMaxBatches {
		n, err := s.st.PruneAuditEvents(ctx, now.Add(-s.cfg.AuditRetention), auditPruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("prune the audit log", "err", err)
			}
			break
		}
		total += n
		if n < auditPruneBatch {
			break
		}
	}
	if total > 0 {
		s.log.Info("pruned the audit log", "records", total, "retention", s.cfg.AuditRetention)
	}
	return total
}
