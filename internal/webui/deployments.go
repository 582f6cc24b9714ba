package webui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

type deploymentRow struct {
	protocol.Deployment
	Scope    string
	Duration string
}

type deploymentsView struct {
	Service     string
	Environment string
	// Current is what runs where (of the filtered service and
	// environment); CurrentErr why it is not shown.
	Current     []protocol.CurrentDeployment
	CurrentErr  string
	Deployments []deploymentRow
	Limits      *protocol.DeploymentLimits
	LimitsErr   string
	FirstURL    string
	NextURL     string
}

// handleDeployments lists the deployments newest first, filtered by
// service and environment in the store (the API's query), a page at a
// time by the API's cursor, under the deployment limits and their usage.
func (u *UI) handleDeployments(w http.ResponseWriter, r *http.Request, s *user) {
	q := r.URL.Query()
	v := deploymentsView{Service: strings.TrimSpace(q.Get("service")), Environment: strings.TrimSpace(q.Get("environment"))}
	cursor := q.Get("page")
	list, err := s.api.ListDeployments(r.Context(), client.DeploymentQuery{Service: v.Service, Environment: v.Environment, Limit: perPage, Page: cursor})
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	for _, d := range list.Deployments {
		row := deploymentRow{Deployment: d, Scope: protocol.ScopeLabel(d.Org, d.Project)}
		if d.FinishedAt != nil {
			row.Duration = took(d.FinishedAt.Sub(d.StartedAt))
		}
		v.Deployments = append(v.Deployments, row)
	}
	link := func(page string) string {
		p := url.Values{}
		for k, s := range map[string]string{"service": v.Service, "environment": v.Environment, "page": page} {
			if s != "" {
				p.Set(k, s)
			}
		}
		if e := p.Encode(); e != "" {
			return "/deployments?" + e
		}
		return "/deployments"
	}
	if list.Next != "" {
		v.NextURL = link(list.Next)
	}
	if cursor != "" {
		v.FirstURL = link("")
	}
	if cur, err := s.api.CurrentDeployments(r.Context(), v.Service, v.Environment); err != nil {
		v.CurrentErr = apiMessage(err)
	} else {
		v.Current = cur.Current
	}
	if lim, err := s.api.DeploymentLimits(r.Context()); err != nil {
		v.LimitsErr = apiMessage(err)
	} else {
		v.Limits = &lim
	}
	u.render(w, r, s, http.StatusOK, "deployments", page{Title: "Deployments", Nav: "deployments", Data: v})
}

type deploymentView struct {
	protocol.Deployment
	Scope    string
	Duration string
	// Verifs are its verifications, each metric with its chart.
	Verifs []verificationView
}

// handleDeployment shows one deployment: who deployed what, the records
// of its deploy steps, and what its verifications saw (a chart a metric).
func (u *UI) handleDeployment(w http.ResponseWriter, r *http.Request, s *user) {
	d, err := s.api.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v := deploymentView{Deployment: d, Scope: protocol.ScopeLabel(d.Org, d.Project), Verifs: verificationViews(d.Verifications)}
	if d.FinishedAt != nil {
		v.Duration = took(d.FinishedAt.Sub(d.StartedAt))
	}
	u.render(w, r, s, http.StatusOK, "deployment", page{Title: "Deployment " + d.ID, Nav: "deployments", Data: v})
}
