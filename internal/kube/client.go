package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// FieldManager is the field manager of legate's server-side applies.
const FieldManager = "legate"

// maxResponse bounds what is read of one answer of the API (a list of
// events or ReplicaSets in a busy namespace).
const maxResponse = 32 << 20

// Client is a minimal client of the Kubernetes API: discovery, server-side
// apply, get, list and patch of objects as JSON. It caches what discovery
// finds for its lifetime (one deploy).
type Client struct {
	cfg Config
	hc  *http.Client

	mu        sync.Mutex
	resources map[string][]apiResource // by group/version
}

// NewClient makes a client of the API cfg describes.
func NewClient(cfg Config) (*Client, error) {
	tr, err := cfg.transport()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, hc: &http.Client{Transport: tr}, resources: map[string][]apiResource{}}, nil
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// StatusError is an answer of the API that is not a success: its code and
// the reason and message of its Status.
type StatusError struct {
	Code    int
	Reason  string
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// do sends a request to path (with its query) and decodes a 2xx answer's
// JSON into into (unless nil).
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, into any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.Server+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", "legate")
	token, err := c.cfg.bearer()
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if len(b) > maxResponse {
		return fmt.Errorf("the answer is larger than %d bytes", maxResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Code: resp.StatusCode}
		var st struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &st) == nil {
			se.Reason, se.Message = st.Reason, st.Message
		}
		if se.Reason == "" {
			se.Reason = http.StatusText(resp.StatusCode)
		}
		return se
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Get reads the object at path (see Resource.Path) into into.
func (c *Client) Get(ctx context.Context, path string, into any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, into)
}

// List reads the collection at path with a label and field selector
// (either may be empty) into into.
func (c *Client) List(ctx context.Context, path, labelSelector, fieldSelector string, into any) error {
	q := url.Values{}
	if labelSelector != "" {
		q.Set("labelSelector", labelSelector)
	}
	if fieldSelector != "" {
		q.Set("fieldSelector", fieldSelector)
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, path, "", nil, into)
}

// Apply applies obj (JSON) at path with server-side apply: field manager
// FieldManager, conflicts forced (legate owns what its manifests set).
// The object as the API stored it goes into into (unless nil).
func (c *Client) Apply(ctx context.Context, path string, obj []byte, into any) error {
	q := url.Values{"fieldManager": {FieldManager}, "force": {"true"}}
	return c.do(ctx, http.MethodPatch, path+"?"+q.Encode(), "application/apply-patch+yaml", obj, into)
}

// Patch sends a JSON patch (RFC 6902) to the object at path.
func (c *Client) Patch(ctx context.Context, path string, patch []byte, into any) error {
	q := url.Values{"fieldManager": {FieldManager}}
	return c.do(ctx, http.MethodPatch, path+"?"+q.Encode(), "application/json-patch+json", patch, into)
}

// Delete deletes the object at path; its dependents (a Deployment's
// ReplicaSets and pods) are deleted by the garbage collector after it.
func (c *Client) Delete(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodDelete, path+"?propagationPolicy=Background", "", nil, nil)
}

// apiResource is one resource of a discovery answer.
type apiResource struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}

// Resource is where objects of a kind live in the API.
type Resource struct {
	// Base is the group-version's path: /api/v1 or /apis/GROUP/VERSION.
	Base string
	// Name is the resource's plural name (deployments).
	Name       string
	Namespaced bool
}

// Path is the path of the object name (the collection when name is "") in
// namespace ns (ignored for a cluster-wide kind).
func (r Resource) Path(ns, name string) string {
	p := r.Base
	if r.Namespaced {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	p += "/" + r.Name
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// Resource finds kind of apiVersion ("v1", "apps/v1") through discovery:
// GET /api/v1 or /apis/GROUP/VERSION, once per group-version.
func (c *Client) Resource(ctx context.Context, apiVersion, kind string) (Resource, error) {
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion
	}
	if strings.Count(apiVersion, "/") > 1 || strings.ContainsAny(apiVersion, "?#% ") || apiVersion == "" {
		return Resource{}, fmt.Errorf("apiVersion %q is invalid: write VERSION or GROUP/VERSION", apiVersion)
	}
	c.mu.Lock()
	list, ok := c.resources[apiVersion]
	c.mu.Unlock()
	if !ok {
		var ans struct {
			Resources []apiResource `json:"resources"`
		}
		if err := c.Get(ctx, base, &ans); err != nil {
			if IsNotFound(err) {
				return Resource{}, fmt.Errorf("the cluster does not serve apiVersion %s (is its CRD installed?)", apiVersion)
			}
			return Resource{}, fmt.Errorf("discover %s: %w", apiVersion, err)
		}
		list = ans.Resources
		c.mu.Lock()
		c.resources[apiVersion] = list
		c.mu.Unlock()
	}
	for _, r := range list {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return Resource{Base: base, Name: r.Name, Namespaced: r.Namespaced}, nil
		}
	}
	return Resource{}, fmt.Errorf("the cluster has no kind %s in apiVersion %s", kind, apiVersion)
}
