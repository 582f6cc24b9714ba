package webui

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// The New delegate page: pick where it runs, name, tags and scope; the
// page creates a token and shows the spec legate manifest would print,
// then waits, live, for the delegate to connect.

// delegateKind is one place a delegate runs.
type delegateKind struct {
	Kind, Label, Hint string
}

var delegateKinds = []delegateKind{
	{"kubernetes", "Kubernetes", "a StatefulSet with its namespace, RBAC and Secret: kubectl apply -f"},
	{"helm", "Helm", "a values file for the legate-delegate chart: helm install -f"},
	{"docker", "Docker", "a docker run command"},
	{"ecs", "ECS", "an ECS task definition (EC2): needs the AWS region"},
	{"fargate", "Fargate", "a Fargate task definition: needs the region and the execution role"},
	{"systemd", "Plain host", "a shell script that installs a systemd service (run as root)"},
}

// newDelegateForm is what the form holds.
type newDelegateForm struct {
	Kind, Name, Tags, Org, Project, ManagerURL string
	Region, ExecutionRole, Subnets             string
	// Image is the container image; AllowLoopback accepts a manager URL
	// on loopback for a trial on the manager's host.
	Image         string
	AllowLoopback bool
	// TokenSecret names a Kubernetes Secret (kubernetes, helm) and
	// TokenSecretARN a Secrets Manager secret (ecs, fargate) the spec
	// reads the token from instead of holding it.
	TokenSecret, TokenSecretARN string
	// Upgrade, Size, RunAsRoot and Hostname are the spec's options
	// (docs/install.md); empty means the defaults.
	Upgrade, Size, Hostname string
	RunAsRoot               bool
}

type newDelegateView struct {
	Kinds []delegateKind
	Sizes []string
	Form  newDelegateForm
	// PageURL is the URL the browser reached the manager at (the default
	// of Form.ManagerURL when the manager has no public URL).
	PageURL string
	// PublicURL is the manager's --public-url; NoImage, when the manager
	// has no --delegate-image, says how to publish one.
	PublicURL, NoImage string
	// After a submission:
	Spec      string
	FileName  string
	TokenName string
	EventsURL string
	// SecretCommand, when the token goes in a secret, puts it there (it
	// holds the token's value).
	SecretCommand string
	// HintAfterMS is how long the page waits for the delegate before it
	// shows what to check.
	HintAfterMS int64
}

// pageURL is the scheme and host the browser reached the UI at: the
// default URL delegates reach the manager at.
func pageURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// newDelegateView is the page's view of form f: the manager's defaults
// (its public URL, else the page's; its delegate image) fill what f
// leaves empty.
func (u *UI) newDelegateView(r *http.Request, f newDelegateForm) newDelegateView {
	v := newDelegateView{Kinds: delegateKinds, Sizes: manifest.Sizes(), Form: f, PageURL: pageURL(r), PublicURL: u.cfg.PublicURL}
	if v.Form.ManagerURL == "" {
		v.Form.ManagerURL = u.cfg.PublicURL
	}
	if v.Form.ManagerURL == "" {
		v.Form.ManagerURL = v.PageURL
	}
	if v.Form.Image == "" && f.Kind != "systemd" {
		v.Form.Image = u.cfg.DelegateImage
	}
	if u.cfg.DelegateImage == "" {
		v.NoImage = "The manager names no image for delegates: " + manifest.NoImageFix + " below. A plain host needs no image."
	}
	return v
}

func (u *UI) handleNewDelegatePage(w http.ResponseWriter, r *http.Request, s *user) {
	v := u.newDelegateView(r, newDelegateForm{Kind: "kubernetes"})
	p := page{Title: "New delegate", Nav: "new", Data: v}
	if !s.policy.AllowsBelow(access.DelegateEdit, access.Account) {
		p.Error = "You may not add delegates: that needs the permission delegate:edit (the role delegate-admin, for one) at some scope."
	}
	u.render(w, r, s, http.StatusOK, "newdelegate", p)
}

// splitList splits a comma- or space-separated list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func (u *UI) handleNewDelegate(w http.ResponseWriter, r *http.Request, s *user) {
	f := newDelegateForm{Kind: r.PostFormValue("kind"), Name: strings.TrimSpace(r.PostFormValue("name")),
		Tags: r.PostFormValue("tags"), Org: strings.TrimSpace(r.PostFormValue("org")), Project: strings.TrimSpace(r.PostFormValue("project")),
		ManagerURL: strings.TrimSpace(r.PostFormValue("manager_url")), Region: strings.TrimSpace(r.PostFormValue("region")),
		ExecutionRole: strings.TrimSpace(r.PostFormValue("execution_role")), Subnets: r.PostFormValue("subnets"),
		TokenSecret: strings.TrimSpace(r.PostFormValue("token_secret")), TokenSecretARN: strings.TrimSpace(r.PostFormValue("token_secret_arn")),
		Image: strings.TrimSpace(r.PostFormValue("image")), AllowLoopback: r.PostFormValue("allow_loopback") != ""}
	f.Upgrade, f.Size, f.Hostname = r.PostFormValue("upgrade"), r.PostFormValue("size"), strings.TrimSpace(r.PostFormValue("hostname"))
	f.RunAsRoot = r.PostFormValue("run_as_root") == "on"
	v := u.newDelegateView(r, f)
	f = v.Form
	fail := func(status int, msg string) {
		u.render(w, r, s, status, "newdelegate", page{Title: "New delegate", Nav: "new", Error: msg, Data: v})
	}
	known := false
	for _, k := range delegateKinds {
		known = known || k.Kind == f.Kind
	}
	switch {
	case !known:
		fail(http.StatusBadRequest, "Pick where the delegate runs.")
		return
	case f.Name == "":
		fail(http.StatusBadRequest, "Give the delegate a name.")
		return
	}
	// A secret field of another kind is left out (the form shows both).
	switch f.Kind {
	case "kubernetes", "helm":
		f.TokenSecretARN = ""
	case "ecs", "fargate":
		f.TokenSecret = ""
	default:
		f.TokenSecret, f.TokenSecretARN = "", ""
	}
	if f.Kind == "systemd" {
		f.Image = ""
	}
	req := protocol.ManifestRequest{Kind: f.Kind, Name: f.Name, Tags: splitList(f.Tags), Org: f.Org, Project: f.Project,
		ManagerURL: f.ManagerURL, Region: f.Region, ExecutionRoleARN: f.ExecutionRole, Subnets: splitList(f.Subnets),
		Image: f.Image, AllowLoopback: f.AllowLoopback}
	req.Upgrade, req.Size, req.RunAsRoot = f.Upgrade, f.Size, f.RunAsRoot
	if f.Kind == "ecs" || f.Kind == "fargate" {
		req.Hostname = f.Hostname // an AWS field: other kinds leave it out, as the secrets
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	tokenName := cut(f.Name, 55) + "-" + hex.EncodeToString(b)
	tok, err := s.api.CreateScopedToken(r.Context(), protocol.CreateTokenRequest{Name: tokenName, Org: f.Org, Project: f.Project})
	if err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			u.apiError(w, r, s, err)
			return
		}
		fail(statusOf(err), apiMessage(err))
		return
	}
	switch {
	case f.TokenSecret != "":
		req.TokenSecret = f.TokenSecret
		v.SecretCommand = "kubectl create namespace " + manifest.DefaultNamespace + " --dry-run=client -o yaml | kubectl apply -f -\n" +
			"kubectl create secret generic " + f.TokenSecret + " --namespace " + manifest.DefaultNamespace +
			" --from-literal=" + manifest.TokenKey + "=" + tok.Value
	case f.TokenSecretARN != "":
		req.TokenSecretARN = f.TokenSecretARN
		v.SecretCommand = "aws secretsmanager put-secret-value --secret-id " + f.TokenSecretARN + " --secret-string " + tok.Value
	default:
		req.Token = tok.Value
	}
	spec, err := s.api.Manifest(r.Context(), req)
	if err != nil {
		// A spec the manager refuses (an ECS kind without a region...)
		// leaves no token behind.
		if _, rerr := s.api.RevokeToken(r.Context(), tok.Name); rerr != nil {
			u.cfg.Logger.Warn("web UI: revoke the token of a refused spec", "token", tok.Name, "err", rerr)
		}
		fail(statusOf(err), apiMessage(err))
		return
	}
	v.Spec, v.TokenName, v.HintAfterMS = spec, tok.Name, u.cfg.NewDelegateHintAfter.Milliseconds()
	v.FileName = map[string]string{"kubernetes": "delegate.yaml", "helm": "values.yaml", "docker": "delegate.sh",
		"ecs": "task-definition.json", "fargate": "task-definition.json", "systemd": "install-delegate.sh"}[f.Kind]
	v.EventsURL = "/delegates/events?" + delegateFilter{Name: f.Name}.query("")
	// The spec holds the token: never cached, never shown again.
	u.render(w, r, s, http.StatusOK, "newdelegate", page{Title: "New delegate " + f.Name, Nav: "new", Data: v})
}
