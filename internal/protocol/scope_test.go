package protocol

import "testing"

func TestCovers(t *testing.T) {
	type scope struct{ org, project string }
	account, orgEng, orgOps := scope{}, scope{"eng", ""}, scope{"ops", ""}
	engWeb, engAPI, opsWeb := scope{"eng", "web"}, scope{"eng", "api"}, scope{"ops", "web"}
	tasks := []scope{account, orgEng, orgOps, engWeb, engAPI, opsWeb}
	tests := []struct {
		d      scope
		covers []scope // every other task scope is not covered
	}{
		{account, tasks},
		{orgEng, []scope{orgEng, engWeb, engAPI}},
		{orgOps, []scope{orgOps, opsWeb}},
		{engWeb, []scope{engWeb}},
		{engAPI, []scope{engAPI}},
		{opsWeb, []scope{opsWeb}},
		// A project without an org counts as account level.
		{scope{"", "web"}, tasks},
		// Names are identifiers: exact match, case and space matter.
		{scope{"Eng", ""}, nil},
		{scope{"eng ", "web"}, nil},
	}
	for _, tt := range tests {
		for _, ts := range tasks {
			want := false
			for _, c := range tt.covers {
				want = want || c == ts
			}
			if got := Covers(tt.d.org, tt.d.project, ts.org, ts.project); got != want {
				t.Errorf("Covers(%q, %q, %q, %q) = %v, want %v", tt.d.org, tt.d.project, ts.org, ts.project, got, want)
			}
		}
	}
}

func TestScopeLabel(t *testing.T) {
	for _, tc := range []struct{ org, project, want string }{
		{"", "", "account"},
		{"", "p", "account"}, // a project without an org is account level
		{"o", "", "org o"},
		{"o", "p", "project o/p"},
	} {
		if got := ScopeLabel(tc.org, tc.project); got != tc.want {
			t.Errorf("ScopeLabel(%q, %q) = %q, want %q", tc.org, tc.project, got, tc.want)
		}
	}
}
