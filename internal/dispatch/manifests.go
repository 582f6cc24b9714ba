package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// bodyManifest: a manifest request carries at most 100 extra variables of
// up to 64 KiB (an INIT_SCRIPT), and JSON escaping can make them larger;
// 1 MiB covers an honest request with room to spare.
const bodyManifest = 1 << 20

// handleManifest answers the manifest of a delegate install: the same
// generator as `legate manifest` (internal/manifest), for the caller's
// account. The answer is text/plain; a refused request gets the
// generator's one-line error as bad_request.
func (m *Service) handleManifest(w http.ResponseWriter, r *http.Request, acct string) {
	body, ok := api.ReadBody(w, r)
	if !ok {
		return
	}
	req, err := decodeManifestRequest(body)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	out, err := m.manifest(req, acct, requestBaseURL(r))
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store") // it may hold a token
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, out)
}

// decodeManifestRequest reads a ManifestRequest strictly: an unknown field
// is refused rather than dropped (a setting the manager does not know must
// not vanish from the manifest), as is anything after the object.
func decodeManifestRequest(body []byte) (protocol.ManifestRequest, error) {
	var req protocol.ManifestRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("invalid manifest request: %v", err)
	}
	if dec.More() {
		return req, fmt.Errorf("invalid manifest request: more than one JSON value")
	}
	return req, nil
}

// manifest fills in what the manager knows (the caller's account, its
// public URL, else the URL the request came in at, its delegate image) and
// generates the manifest.
func (m *Service) manifest(req protocol.ManifestRequest, acct, baseURL string) (string, error) {
	if req.AccountID != "" && req.AccountID != acct {
		return "", fmt.Errorf("account_id %q is not the account of this API key: leave it out", req.AccountID)
	}
	req.AccountID = acct
	d := manifest.Defaults{ManagerURL: m.cfg.PublicURL, Image: m.cfg.DelegateImage}
	if d.ManagerURL == "" {
		d.ManagerURL = baseURL
	}
	return manifest.Generate(d.Fill(req))
}

// requestBaseURL is the URL a request came in at: scheme and host.
func requestBaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
