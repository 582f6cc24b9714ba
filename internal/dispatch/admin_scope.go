package dispatch

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
)

func (m *Service) handleExplainTask(w http.ResponseWriter, r *http.Request, acct string) {
	t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		api.StoreError(w, err, "task "+r.PathValue("id"))
		return
	}
	summary, verdicts, err := m.explain(r.Context(), t)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	if verdicts == nil {
		verdicts = []protocol.DelegateVerdict{}
	}
	outlook := ""
	if t.Status == protocol.StatusQueued { // the fast answer or the wait
		if known, err := m.knownDelegates(r.Context(), acct); err == nil {
			outlook = m.policy().Outlook(verdicts, known, m.assignTask(r.Context(), t), m.caps, m.cfg.Now(), time.Duration(t.QueueTimeoutMS)*time.Millisecond)
		}
	}
	switch {
	case protocol.Terminal(t.Status):
		summary = fmt.Sprintf("task is %s (ran on %s); as delegates stand now: %s", t.Status, orNone(t.DelegateName), summary)
	case t.Status == protocol.StatusRunning:
		summary = fmt.Sprintf("task is running on %s (%s); as delegates stand now: %s", t.DelegateName, t.DelegateHostname, summary)
	}
	api.WriteJSON(w, http.StatusOK, protocol.Explanation{TaskID: t.ID, Status: t.Status, Summary: summary, Delegates: verdicts, Outlook: outlook})
}

func orNone(s string) string {
	if s == "" {
		return "no delegate"
	}
	return s
}

func (m *Service) handleDescribeDelegate(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	ds, err := m.delegateGroup(r.Context(), acct, name)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	cs, err := m.st.ListConfigurations(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "configurations")
		return
	}
	results, err := m.st.ConfigurationResults(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "configuration results")
		return
	}
	now := m.cfg.Now()
	out := protocol.DelegateDetails{Name: name, Instances: []protocol.DelegateDetail{}}
	for _, d := range ds {
		if !strings.EqualFold(d.Name, name) {
			continue
		}
		det := protocol.DelegateDetail{Delegate: d, Allowlist: []protocol.CapabilityEntry{}, Denylist: []protocol.CapabilityEntry{}}
		target := configTarget{tags: d.Tags, name: d.Name, hostname: d.Hostname, org: d.Org, project: d.Project}
		if c := applicableConfiguration(cs, target); c != nil {
			det.ConfigurationApplies = &protocol.ConfigurationRef{Name: c.Name, Version: c.Version}
		}
		if res, ok := results[d.InstanceID]; ok {
			det.ConfigurationResult = configurationResultView(res, api.CallerOf(r.Context()).Policy)
		}
		allow, deny := m.caps.Entries(d.InstanceID, now)
		for _, e := range allow {
			det.Allowlist = append(det.Allowlist, protocol.CapabilityEntry{Criteria: e.Criteria, ExpiresAt: e.ExpiresAt.UTC(), TimeLeftMS: e.ExpiresAt.Sub(now).Milliseconds()})
		}
		for _, e := range deny {
			det.Denylist = append(det.Denylist, protocol.CapabilityEntry{Criteria: e.Criteria, ExpiresAt: e.ExpiresAt.UTC(), TimeLeftMS: e.ExpiresAt.Sub(now).Milliseconds(), Error: e.Error})
		}
		out.Instances = append(out.Instances, det)
	}
	if len(out.Instances) == 0 {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no delegate named %q in this account", name)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}
