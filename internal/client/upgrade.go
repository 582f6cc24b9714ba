package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/legate-dev/legate/internal/protocol"
)

// SetUpgradePolicy pins the delegate group called name to a version,
// holds it back or releases it (protocol.UpgradePin, UpgradeHold,
// UpgradeRelease).
func (c *Client) SetUpgradePolicy(ctx context.Context, name string, req protocol.UpgradePolicyRequest) (protocol.UpgradePolicy, error) {
	const op = "set upgrade policy"
	if err := requireID(op, "delegate name", name); err != nil {
		return protocol.UpgradePolicy{}, err
	}
	var out protocol.UpgradePolicy
	err := c.do(ctx, &call{op: op, method: http.MethodPut, path: protocol.PathDelegates + "/" + seg(name) + "/upgrade", in: req, out: &out})
	return out, err
}

// tokenHeaders are a watcher's credentials: the delegate token as a
// bearer and the account in protocol.HeaderAccountID.
func tokenHeaders(accountID, token string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(protocol.HeaderAccountID, accountID)
	return h
}

// UpgradeCheck asks which version the watcher's delegate should run, and
// reports how its upgrade goes. It authenticates with the delegate token.
func (c *Client) UpgradeCheck(ctx context.Context, accountID, token string, req protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error) {
	var out protocol.UpgradeCheckResponse
	err := c.do(ctx, &call{op: "upgrade check", method: http.MethodPost, path: protocol.PathUpgradeCheck, in: req, out: &out,
		noAuth: true, header: tokenHeaders(accountID, token)})
	return out, err
}

// releasePath is the path of a release binary (suffix "" or "/signature"),
// with the binary named in the query unless it is legate.
func releasePath(binary, version, goos, goarch, suffix string) string {
	p := protocol.PathReleases + "/" + seg(version) + "/" + seg(goos) + "/" + seg(goarch) + suffix
	if binary != "" && binary != "legate" {
		p += "?" + url.Values{protocol.QueryReleaseBinary: {binary}}.Encode()
	}
	return p
}

// ReleaseSignature fetches the signature file of the release binary
// binary ("legate" or "legate-delegate").
func (c *Client) ReleaseSignature(ctx context.Context, accountID, token, binary, version, goos, goarch string) ([]byte, error) {
	var text string
	err := c.do(ctx, &call{op: "download signature", method: http.MethodGet, path: releasePath(binary, version, goos, goarch, "/signature"),
		text: &text, noAuth: true, header: tokenHeaders(accountID, token), accept: "text/plain"})
	return []byte(text), err
}

// DownloadRelease writes the release binary binary ("legate" or
// "legate-delegate") to w, at most limit bytes. It has no timeout of its
// own: ctx bounds it.
func (c *Client) DownloadRelease(ctx context.Context, accountID, token, binary, version, goos, goarch string, w io.Writer, limit int64) (int64, error) {
	const op = "download release"
	req, err := c.newRequest(ctx, &call{op: op, method: http.MethodGet, path: releasePath(binary, version, goos, goarch, ""),
		noAuth: true, header: tokenHeaders(accountID, token), accept: "application/octet-stream"})
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer closeBody(resp.Body)
	if err := c.checkStatus(resp); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return n, fmt.Errorf("%s: %w", op, err)
	}
	if n > limit {
		return n, fmt.Errorf("%s: larger than %d bytes", op, limit)
	}
	return n, nil
}
