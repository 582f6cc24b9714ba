package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// DelegateQuery is what a delegate listing (GET PathDelegates) selects,
// as its query parameters (since v4). The zero value selects
// every instance that did not deregister, in one answer, as before.
//
// Filters apply to instances; a page holds whole delegate groups (every
// matching instance of at most Limit names), ordered by name, and the
// answer's Next, when set, is the Page of the next one.
type DelegateQuery struct {
	// All includes the instances that deregistered (all=true).
	All bool
	// Limit is how many delegate names a page holds at most (limit=,
	// 1-1000); 0 is every one.
	Limit int
	// Page is the Next of the previous answer (page=).
	Page string
	// Name keeps the delegates whose name contains it, case ignored
	// (name=).
	Name string
	// Connected keeps connected (true) or not connected instances
	// (connected=true|false); nil keeps both.
	Connected *bool
	// Tag keeps the instances with this tag (tag=).
	Tag string
	// Approval keeps the instances in this approval state (approval=
	// pending|approved|rejected).
	Approval string
	// Org and Project keep the instances at or beneath a scope (scope=ORG
	// or scope=ORG/PROJECT).
	Org, Project string
}

// MaxDelegatePage is the largest limit of a delegate listing.
const MaxDelegatePage = 1000

// The query parameters of a delegate listing besides QueryAll.
const (
	QueryLimit     = "limit"
	QueryPage      = "page"
	QueryName      = "name"
	QueryConnected = "connected"
	QueryTag       = "tag"
	QueryApproval  = "approval"
	QueryScope     = "scope"
)

// Paged reports whether q asks for a page or filters (anything but All).
func (q DelegateQuery) Paged() bool {
	return q.Limit > 0 || q.Page != "" || q.Name != "" || q.Connected != nil || q.Tag != "" || q.Approval != "" || q.Org != ""
}

// Values is q as query parameters.
func (q DelegateQuery) Values() url.Values {
	v := url.Values{}
	if q.All {
		v.Set(QueryAll, "true")
	}
	if q.Limit > 0 {
		v.Set(QueryLimit, strconv.Itoa(q.Limit))
	}
	for k, s := range map[string]string{QueryPage: q.Page, QueryName: q.Name, QueryTag: q.Tag, QueryApproval: q.Approval} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Connected != nil {
		v.Set(QueryConnected, strconv.FormatBool(*q.Connected))
	}
	if q.Org != "" {
		s := q.Org
		if q.Project != "" {
			s += "/" + q.Project
		}
		v.Set(QueryScope, s)
	}
	return v
}

// ParseDelegateQuery reads a delegate listing's query parameters; an
// error names the parameter and what it accepts.
func ParseDelegateQuery(v url.Values) (DelegateQuery, error) {
	var q DelegateQuery
	for k, vs := range v {
		if len(vs) > 1 {
			return q, fmt.Errorf("query parameter %s is given %d times: give it once", k, len(vs))
		}
	}
	boolOf := func(name string) (*bool, error) {
		s := v.Get(name)
		if s == "" {
			return nil, nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("query parameter %s=%q: use true or false", name, s)
		}
		return &b, nil
	}
	all, err := boolOf(QueryAll)
	if err != nil {
		return q, err
	}
	q.All = all != nil && *all
	if q.Connected, err = boolOf(QueryConnected); err != nil {
		return q, err
	}
	if s := v.Get(QueryLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDelegatePage {
			return q, fmt.Errorf("query parameter %s=%q: use a number of delegates from 1 to %d", QueryLimit, s, MaxDelegatePage)
		}
		q.Limit = n
	}
	text := func(name string, max int) (string, error) {
		s := v.Get(name)
		if len(s) > max || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", fmt.Errorf("query parameter %s: at most %d characters, no control characters", name, max)
		}
		return s, nil
	}
	if q.Page, err = text(QueryPage, 63); err != nil {
		return q, err
	}
	if q.Name, err = text(QueryName, 63); err != nil {
		return q, err
	}
	if q.Tag, err = text(QueryTag, 128); err != nil {
		return q, err
	}
	switch q.Approval = v.Get(QueryApproval); q.Approval {
	case "", ApprovalPending, ApprovalApproved, ApprovalRejected:
	default:
		return q, fmt.Errorf("query parameter %s=%q: use %s, %s or %s", QueryApproval, q.Approval, ApprovalPending, ApprovalApproved, ApprovalRejected)
	}
	if s := v.Get(QueryScope); s != "" {
		if q.Org, q.Project, err = ParseScope(s); err != nil {
			return q, fmt.Errorf("query parameter %s=%q: %w", QueryScope, s, err)
		}
	}
	return q, nil
}

// ParseScope reads a scope written ORG or ORG/PROJECT (the scope= query
// parameter of listings).
func ParseScope(s string) (org, project string, err error) {
	org, project, _ = strings.Cut(s, "/")
	if !ValidName(org) || (project != "" || strings.HasSuffix(s, "/")) && !ValidName(project) {
		return "", "", errors.New("use ORG or ORG/PROJECT")
	}
	return org, project, nil
}

// ValidName reports whether s is a valid name of a token, org, project
// or connector: 1-63 letters, digits, '.', '_' or '-', starting with a
// letter or digit (^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$). A loop, not a
// regexp: a package-level regexp is compiled at init in every process,
// delegates included, and costs each of them memory and allocations at
// every start (BENCHMARKS.md, delegate idle RSS).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') ||
			(i > 0 && (c == '.' || c == '_' || c == '-'))
		if !ok {
			return false
		}
	}
	return true
}

// Summary is the figures in one line, as the Delegates pages and
// `legate delegates describe` show them: "cpu 12.5% (delegate 0.4%),
// memory 41.0%, rss 23.4 MiB, 12 tasks run (1 failed), last acquire
// 3.2 ms"; a figure not measured is left out.
func (p DelegatePerf) Summary() string {
	var parts []string
	if p.CPUPercent != nil {
		s := fmt.Sprintf("cpu %.1f%%", *p.CPUPercent)
		if p.ProcessCPUPercent != nil {
			s += fmt.Sprintf(" (delegate %.1f%%)", *p.ProcessCPUPercent)
		}
		parts = append(parts, s)
	}
	if p.MemoryPercent != nil {
		parts = append(parts, fmt.Sprintf("memory %.1f%%", *p.MemoryPercent))
	}
	if p.RSSBytes != nil {
		parts = append(parts, fmt.Sprintf("rss %.1f MiB", float64(*p.RSSBytes)/(1<<20)))
	}
	tasks := fmt.Sprintf("%d task", p.TasksRun)
	if p.TasksRun != 1 {
		tasks += "s"
	}
	tasks += " run"
	if p.TasksFailed > 0 {
		tasks += fmt.Sprintf(" (%d failed)", p.TasksFailed)
	}
	parts = append(parts, tasks)
	if p.AcquireMS > 0 {
		parts = append(parts, fmt.Sprintf("last acquire %.1f ms", p.AcquireMS))
	}
	return strings.Join(parts, ", ")
}
