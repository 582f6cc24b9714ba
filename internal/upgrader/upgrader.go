// Package upgrader is the upgrader of Kubernetes delegates installed with
// automatic upgrades (legate manifest kubernetes --upgrade auto): run by a
// CronJob, it asks the manager which version the delegate's group wants
// and, when the StatefulSet's delegate container runs another, patches its
// image to the same repository with that version's tag. The StatefulSet's
// rolling update and the delegates' drain make the switch fail no task.
package upgrader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/release"
)

// Manager is what the upgrader needs of the manager (a *client.Client).
type Manager interface {
	UpgradeCheck(ctx context.Context, accountID, token string, req protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error)
}

// Options configures an Upgrader.
type Options struct {
	Manager Manager
	// AccountID, Token and Name: the delegate's account, token and name.
	AccountID, Token, Name string
	// Namespace and StatefulSet name the delegate's StatefulSet;
	// Container its delegate container ("" = "delegate").
	Namespace, StatefulSet, Container string
	// API is the Kubernetes API's base URL, BearerToken the
	// ServiceAccount's token, HTTPClient the client that trusts the API's
	// CA.
	API         string
	BearerToken string
	HTTPClient  *http.Client
	// Logger; nil = slog.Default().
	Logger *slog.Logger
}

// Upgrader does one upgrade pass.
type Upgrader struct {
	opts Options
	log  *slog.Logger
}

// New checks the options.
func New(opts Options) (*Upgrader, error) {
	switch {
	case opts.Manager == nil:
		return nil, errors.New("upgrader: no manager")
	case opts.Namespace == "" || opts.StatefulSet == "":
		return nil, errors.New("upgrader: UPGRADER_NAMESPACE and UPGRADER_STATEFULSET are required")
	case opts.API == "":
		return nil, errors.New("upgrader: no Kubernetes API (not in a pod: set UPGRADER_KUBERNETES_API)")
	case opts.Name == "":
		return nil, errors.New("upgrader: no delegate name")
	}
	if opts.Container == "" {
		opts.Container = "delegate"
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Upgrader{opts: opts, log: opts.Logger}, nil
}

// Result says what a pass did.
type Result struct {
	// From and To are the image before and after (equal when nothing
	// changed); Reason says why nothing changed.
	From, To string
	Patched  bool
	Reason   string
}

// Run does one pass: it reads the StatefulSet's image, asks the manager
// which version the group wants, and patches the image when it differs.
func (u *Upgrader) Run(ctx context.Context) (Result, error) {
	image, err := u.currentImage(ctx)
	if err != nil {
		return Result{}, err
	}
	repo, tag := splitImage(image)
	resp, err := u.opts.Manager.UpgradeCheck(ctx, u.opts.AccountID, u.opts.Token, protocol.UpgradeCheckRequest{
		Name: u.opts.Name, Hostname: "statefulset/" + u.opts.StatefulSet, Version: tag, OS: "linux", Arch: runtime.GOARCH, AutoUpgrade: true,
	})
	if err != nil {
		return Result{}, fmt.Errorf("ask the manager which version to run: %w", err)
	}
	res := Result{From: image, To: image}
	switch {
	case resp.Held || resp.Wanted == "":
		res.Reason = "the delegate group is held back"
	case !release.ValidVersionName(resp.Wanted):
		return res, fmt.Errorf("the manager wants %q, which is not a version tag", resp.Wanted)
	case release.SameVersion(tag, resp.Wanted):
		res.Reason = "it runs the version the manager wants, " + resp.Wanted
	case !resp.Pinned && release.Downgrade(tag, resp.Wanted):
		res.Reason = "the manager wants " + resp.Wanted + ", older than " + tag +
			", and no administrator pinned it; a delegate goes back only to a pinned version (legate delegates upgrade pin NAME VERSION)"
	}
	if res.Reason != "" {
		u.log.Info("no upgrade", "statefulset", u.opts.StatefulSet, "image", image, "reason", res.Reason)
		return res, nil
	}
	res.To = repo + ":" + resp.Wanted
	if err := u.patchImage(ctx, res.To); err != nil {
		return res, err
	}
	res.Patched = true
	u.log.Info("patched the StatefulSet's image: its pods are replaced one at a time, each delegate draining first",
		"statefulset", u.opts.StatefulSet, "from", image, "to", res.To)
	return res, nil
}

func (u *Upgrader) statefulSetURL() string {
	return strings.TrimRight(u.opts.API, "/") + "/apis/apps/v1/namespaces/" + url.PathEscape(u.opts.Namespace) +
		"/statefulsets/" + url.PathEscape(u.opts.StatefulSet)
}

// statefulSet is the part of a StatefulSet the upgrader reads.
type statefulSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name  string `json:"name"`
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func (u *Upgrader) do(ctx context.Context, method, contentType string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.statefulSetURL(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if u.opts.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+u.opts.BearerToken)
	}
	resp, err := u.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s the StatefulSet %s/%s: %w", method, u.opts.Namespace, u.opts.StatefulSet, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s the StatefulSet %s/%s: HTTP %d: %s", method, u.opts.Namespace, u.opts.StatefulSet, resp.StatusCode,
			strings.TrimSpace(string(b[:min(len(b), 300)])))
	}
	return b, nil
}

func (u *Upgrader) currentImage(ctx context.Context) (string, error) {
	b, err := u.do(ctx, http.MethodGet, "", nil)
	if err != nil {
		return "", err
	}
	var sts statefulSet
	if err := json.Unmarshal(b, &sts); err != nil {
		return "", fmt.Errorf("decode the StatefulSet: %w", err)
	}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == u.opts.Container {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the StatefulSet %s/%s has no container %q", u.opts.Namespace, u.opts.StatefulSet, u.opts.Container)
}

// patchImage sets the delegate container's image with a strategic merge
// patch (containers merge by name: the other fields stay).
func (u *Upgrader) patchImage(ctx context.Context, image string) error {
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]string{{"name": u.opts.Container, "image": image}},
	}}}}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = u.do(ctx, http.MethodPatch, "application/strategic-merge-patch+json", b)
	return err
}

// splitImage splits an image reference into its repository and tag
// ("" when it has none); a digest is dropped with the tag.
func splitImage(image string) (repo, tag string) {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		return image[:i], image[i+1:]
	}
	return image, ""
}
