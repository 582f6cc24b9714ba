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
	if lim, err := s.api.DeploymentLimits(r.Context()); err != nil {
		v.LimitsErr = apiMessage(err)
	} else {
		v.Limits = &lim
	}
	u.render(w, r, s, http.StatusOK, "deployments", page{Title: "Deployments", Nav: "deployments", Data: v})
}
