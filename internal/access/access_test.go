package access

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCovers(t *testing.T) {
	acct, o1, o2 := Account, Scope{Org: "o1"}, Scope{Org: "o2"}
	p1, p2, o2p1 := Scope{Org: "o1", Project: "p1"}, Scope{Org: "o1", Project: "p2"}, Scope{Org: "o2", Project: "p1"}
	tests := []struct {
		s, t Scope
		want bool
	}{
		{acct, acct, true}, {acct, o1, true}, {acct, p1, true},
		{o1, acct, false}, {o1, o1, true}, {o1, p1, true}, {o1, o2, false}, {o1, o2p1, false},
		{p1, p1, true}, {p1, p2, false}, {p1, o1, false}, {p1, acct, false}, {p1, o2p1, false},
		{o2, o2p1, true},
	}
	for _, tt := range tests {
		if got := tt.s.Covers(tt.t); got != tt.want {
			t.Errorf("%s covers %s = %v, want %v", tt.s, tt.t, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	alice := Principal{Kind: KindUser, ID: "u1", Name: "alice", Groups: []string{"g1"}}
	bot := Principal{Kind: KindServiceAccount, ID: "u1", Name: "bot"}
	p1 := Scope{Org: "o1", Project: "p1"}
	custom := map[string]Role{"deleter": {Name: "deleter", Permissions: []Permission{DelegateDelete}}}
	tests := []struct {
		name     string
		who      Principal
		bindings []Binding
		perm     Permission
		at       Scope
		want     bool
	}{
		{"no binding, delegate view always", alice, nil, DelegateView, p1, true},
		{"no binding", alice, nil, TaskView, p1, false},
		{"viewer at account", alice, []Binding{{RoleViewer, KindUser, "u1", Account}}, TaskView, p1, true},
		{"viewer cannot run", alice, []Binding{{RoleViewer, KindUser, "u1", Account}}, TaskRun, p1, false},
		{"viewer cannot revoke", alice, []Binding{{RoleViewer, KindUser, "u1", Account}}, TokenDelete, Scope{Org: "o1"}, false},
		{"project admin in its project", alice, []Binding{{RoleProjectAdmin, KindUser, "u1", p1}}, TaskRun, p1, true},
		{"project admin in another project", alice, []Binding{{RoleProjectAdmin, KindUser, "u1", p1}}, TaskRun, Scope{Org: "o1", Project: "p2"}, false},
		{"project admin not at its org", alice, []Binding{{RoleProjectAdmin, KindUser, "u1", p1}}, TaskRun, Scope{Org: "o1"}, false},
		{"org admin beneath", alice, []Binding{{RoleOrgAdmin, KindUser, "u1", Scope{Org: "o1"}}}, UserManage, p1, true},
		{"org admin not in sibling", alice, []Binding{{RoleOrgAdmin, KindUser, "u1", Scope{Org: "o1"}}}, TaskRun, Scope{Org: "o2"}, false},
		{"through a group", alice, []Binding{{RoleAccountAdmin, KindGroup, "g1", Account}}, SecretAccess, p1, true},
		{"another group", alice, []Binding{{RoleAccountAdmin, KindGroup, "g2", Account}}, SecretAccess, p1, false},
		{"same ID, other kind", bot, []Binding{{RoleAccountAdmin, KindUser, "u1", Account}}, TaskView, p1, false},
		{"service account", bot, []Binding{{RoleAccountAdmin, KindServiceAccount, "u1", Account}}, TaskView, p1, true},
		{"delegate admin lacks secret access", alice, []Binding{{RoleDelegateAdmin, KindUser, "u1", Account}}, SecretAccess, p1, false},
		{"delegate admin deletes delegates", alice, []Binding{{RoleDelegateAdmin, KindUser, "u1", Account}}, DelegateDelete, p1, true},
		{"custom role", alice, []Binding{{"deleter", KindUser, "u1", Account}}, DelegateDelete, p1, true},
		{"custom role lacks", alice, []Binding{{"deleter", KindUser, "u1", Account}}, DelegateEdit, p1, false},
		{"unknown role grants nothing", alice, []Binding{{"gone", KindUser, "u1", Account}}, DelegateDelete, p1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := &Policy{Principal: tt.who, Bindings: tt.bindings, Roles: custom}
			err := pol.Check(tt.perm, Resource{Kind: "task", Name: "t1", Scope: tt.at})
			if got := err == nil; got != tt.want {
				t.Fatalf("Check(%s at %s) = %v, want allowed %v", tt.perm, tt.at, err, tt.want)
			}
			if err == nil {
				return
			}
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("refusal %T, want *Refusal", err)
			}
			for _, want := range []string{string(tt.perm), `task "t1"`, tt.at.String(), tt.who.Name} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestAllowsBelow(t *testing.T) {
	alice := Principal{Kind: KindUser, ID: "u1", Name: "alice"}
	pol := &Policy{Principal: alice, Bindings: []Binding{{RoleViewer, KindUser, "u1", Scope{Org: "o1", Project: "p1"}}}}
	for _, tt := range []struct {
		at   Scope
		want bool
	}{{Account, true}, {Scope{Org: "o1"}, true}, {Scope{Org: "o2"}, false}, {Scope{Org: "o1", Project: "p2"}, false}} {
		if got := pol.AllowsBelow(TaskView, tt.at); got != tt.want {
			t.Errorf("AllowsBelow(task:view, %s) = %v, want %v", tt.at, got, tt.want)
		}
	}
}

// Scopes agrees with Allows: a scope is allowed exactly when one of the
// returned scopes covers it (or all is set).
func TestScopes(t *testing.T) {
	alice := Principal{Kind: KindUser, ID: "u1", Name: "alice", Groups: []string{"g1"}}
	p1, p2, o1, o2 := Scope{Org: "o1", Project: "p1"}, Scope{Org: "o1", Project: "p2"}, Scope{Org: "o1"}, Scope{Org: "o2"}
	o2p1 := Scope{Org: "o2", Project: "p1"}
	tests := []struct {
		name     string
		bindings []Binding
		perm     Permission
		all      bool
		scopes   []Scope
	}{
		{"none", nil, TaskView, false, nil},
		{"delegate view always", nil, DelegateView, true, nil},
		{"a project", []Binding{{RoleViewer, KindUser, "u1", p1}}, TaskView, false, []Scope{p1}},
		{"a project and an org, through a group", []Binding{{RoleViewer, KindUser, "u1", p1}, {RoleProjectAdmin, KindGroup, "g1", o2}}, TaskView, false, []Scope{p1, o2}},
		{"the account wins", []Binding{{RoleViewer, KindUser, "u1", p1}, {RoleViewer, KindUser, "u1", Account}}, TaskView, true, nil},
		{"a role without the permission", []Binding{{RoleDelegateAdmin, KindUser, "u1", Account}, {RoleViewer, KindUser, "u1", p2}}, TaskRun, false, nil},
		{"someone else's binding", []Binding{{RoleViewer, KindUser, "u2", Account}}, TaskView, false, nil},
		{"repeated", []Binding{{RoleViewer, KindUser, "u1", p1}, {RoleProjectAdmin, KindUser, "u1", p1}}, TaskView, false, []Scope{p1}},
	}
	for _, tt := range tests {
		pol := &Policy{Principal: alice, Bindings: tt.bindings}
		all, scopes := pol.Scopes(tt.perm)
		if all != tt.all || !cmp.Equal(scopes, tt.scopes) {
			t.Errorf("%s: Scopes(%s) = %v, %v; want %v, %v", tt.name, tt.perm, all, scopes, tt.all, tt.scopes)
		}
		for _, at := range []Scope{Account, o1, o2, p1, p2, o2p1} {
			covered := all
			for _, sc := range scopes {
				covered = covered || sc.Covers(at)
			}
			if covered != pol.Allows(tt.perm, at) {
				t.Errorf("%s: Scopes(%s) covers %s: %v, Allows: %v", tt.name, tt.perm, at, covered, !covered)
			}
		}
	}
}

func TestBuiltinRoles(t *testing.T) {
	has := map[string][]Permission{}
	for _, r := range Builtins() {
		has[r.Name] = r.Permissions
		for _, p := range r.Permissions {
			if _, err := ParsePermission(string(p)); err != nil {
				t.Errorf("role %s: %v", r.Name, err)
			}
		}
	}
	if diff := cmp.Diff(All(), has[RoleAccountAdmin]); diff != "" {
		t.Errorf("account admin lacks permissions:\n%s", diff)
	}
	for _, p := range has[RoleViewer] {
		if !strings.HasSuffix(string(p), ":view") {
			t.Errorf("viewer has %s", p)
		}
	}
	for _, p := range has[RoleDelegateAdmin] {
		if p == SecretAccess || p == ConnectorAccess || p == TaskRun {
			t.Errorf("delegate admin has %s", p)
		}
	}
	for _, p := range has[RoleProjectAdmin] {
		if p == UserManage || p == OrgEdit {
			t.Errorf("project admin has %s", p)
		}
	}
}

func TestParsePermission(t *testing.T) {
	tests := []struct {
		in      string
		want    []Permission
		wantErr string
	}{
		{"delegate:delete", []Permission{DelegateDelete}, ""},
		{" Secret:Access ", []Permission{SecretAccess}, ""},
		{"task:*", []Permission{TaskView, TaskRun, TaskCancel, TaskPrivileged}, ""},
		{"delegate", nil, "want RESOURCE:ACTION"},
		{"delegate:run", nil, "delegate has the actions view, edit, delete"},
		{"robot:view", nil, "unknown resource"},
	}
	for _, tt := range tests {
		got, err := ParsePermission(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePermission(%q) = %v, %v; want error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePermission(%q): %v", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParsePermission(%q):\n%s", tt.in, diff)
		}
	}
}

func TestParseScope(t *testing.T) {
	tests := []struct {
		in   string
		want Scope
		ok   bool
	}{
		{"", Account, true}, {"account", Account, true}, {"o1", Scope{Org: "o1"}, true},
		{"o1/p1", Scope{Org: "o1", Project: "p1"}, true},
		{"/p1", Scope{}, false}, {"o1/", Scope{}, false}, {"o1/p1/x", Scope{}, false}, {"-o", Scope{}, false},
	}
	for _, tt := range tests {
		got, err := ParseScope(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseScope(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParsePermission(f *testing.F) {
	for _, s := range []string{"delegate:delete", "task:*", "x", ":", "secret:access:x", "ÄÖ:view"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePermission(s)
		if err != nil {
			return
		}
		if len(ps) == 0 {
			t.Fatalf("ParsePermission(%q) = no permissions, no error", s)
		}
		for _, p := range ps {
			again, err := ParsePermission(string(p))
			if err != nil || len(again) != 1 || again[0] != p {
				t.Fatalf("ParsePermission(%q) = %v, which does not parse back: %v %v", s, p, again, err)
			}
		}
	})
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"account", "o1", "o1/p1", "/", "a/b/c", " o "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseScope(s)
		if err != nil {
			return
		}
		if !sc.Valid() {
			t.Fatalf("ParseScope(%q) = %+v, not valid", s, sc)
		}
		again, err := ParseScope(sc.Key())
		if err != nil || again != sc {
			t.Fatalf("ParseScope(%q) = %+v; its key %q parses to %+v, %v", s, sc, sc.Key(), again, err)
		}
	})
}

func TestPassword(t *testing.T) {
	h := HashPassword("correct horse")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q", h)
	}
	if h2 := HashPassword("correct horse"); h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, tt := range []struct {
		hash, pw string
		want     bool
	}{
		{h, "correct horse", true}, {h, "correct horse ", false}, {h, "", false},
		{"", "", false}, {"", "correct horse", false},
		{strings.Replace(h, "m=19456", "m=4294967295", 1), "correct horse", false},
	} {
		if got := VerifyPassword(tt.hash, tt.pw); got != tt.want {
			t.Errorf("VerifyPassword(%q, %q) = %v, want %v", tt.hash, tt.pw, got, tt.want)
		}
	}
	for pw, ok := range map[string]bool{"short": false, "eight ch": true, strings.Repeat("x", MaxPasswordLen+1): false} {
		if err := CheckPassword(pw); (err == nil) != ok {
			t.Errorf("CheckPassword(%d bytes) = %v", len(pw), err)
		}
	}
}

func FuzzParsePHC(f *testing.F) {
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U")
	f.Add("$argon2id$v=19$m=8,t=1,p=1$$")
	f.Add("$bcrypt$")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parsePHC(s)
		if err != nil {
			return
		}
		if h.memory > 1<<20 || h.time > 16 || h.threads > 16 || len(h.key) > 64 {
			t.Fatalf("parsePHC(%q) accepted unbounded parameters %+v", s, h)
		}
	})
}
