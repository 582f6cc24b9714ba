package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Pipeline webhooks: POST PathHooks/{id}, signed with the webhook's secret
// over a timestamp, a delivery ID and the body (HeaderLegateSignature256),
// starts a run of the webhook's pipeline, inputs taken from the JSON
// payload. A delivery is accepted once and only within WebhookWindow of
// when it was signed, so a captured one cannot be sent again. The webhook
// acts as the principal who enabled it (or last rotated its secret),
// checked at every delivery as a manual run by that principal would be;
// an edit of the pipeline by someone who may not run the new text
// suspends it (pipelines_api.go), so an edit never runs with more rights
// than its author has.

// bodyWebhook: a GitHub payload is at most 25 MB, but the ones a
// pipeline starts from (push, release, a CI system's call) are tens of
// KiB; 1 MiB keeps a flood of unauthenticated bodies small.
const bodyWebhook = 1 << 20

// maxDeliveryLen bounds a delivery ID (a UUID has 36 characters).
const maxDeliveryLen = 200

// maxRememberedDeliveries bounds the delivery IDs remembered for one
// webhook (those of the last WebhookWindow or so): past it, deliveries are
// refused until older ones expire.
const maxRememberedDeliveries = 10000

// maxTimestampLen bounds the digits of HeaderLegateTimestamp.
const maxTimestampLen = 12

// webhookPath is the URL path of webhook id.
func webhookPath(id string) string { return protocol.PathHooks + "/" + id }

func webhookView(h store.Webhook) *protocol.PipelineWebhook {
	v := &protocol.PipelineWebhook{Path: webhookPath(h.ID), EnabledBy: h.EnabledBy, CreatedAt: h.CreatedAt, RotatedAt: h.RotatedAt,
		EnabledVersion: h.EnabledVersion, Suspended: h.SuspendedReason}
	if h.SuspendedReason != "" {
		at := h.SuspendedAt.UTC()
		v.SuspendedAt = &at
	}
	return v
}

func (svc *Service) handleEnableWebhook(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	var req protocol.EnableWebhookRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	caller := api.CallerOf(r.Context()).Policy
	pr := caller.Principal
	// The webhook acts as its enabler: one who may not run the pipeline
	// would enable a webhook whose every delivery is refused.
	if reason, err := svc.mayNotRun(r.Context(), caller, acct, org, project, name); err != nil {
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	} else if reason != "" {
		api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden,
			"the webhook of %s would act as you, and you may not run it: %s; someone who may run it enables the webhook", pipelineLabel(name, org, project), reason)
		return
	}
	h := store.Webhook{ID: api.NewSecret("wh_", 16), AccountID: acct, Org: org, Project: project, Pipeline: name,
		PrincipalKind: pr.Kind, PrincipalID: pr.ID, EnabledBy: api.PrincipalLabel(pr)}
	if pr.Kind == protocol.OwnerAccount {
		h.PrincipalID, h.EnabledBy = acct, "account"
	}
	secret := api.NewSecret("whsec_", 32)
	stored, err := svc.st.SetWebhook(r.Context(), h, secret, req.Rotate, svc.now())
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = name, org, project
		if stored.ID != "" {
			e.Detail = "webhook " + stored.ID
			if req.Rotate && stored.ID != h.ID {
				e.Detail += " (secret rotated)"
			}
		}
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		cur, _ := svc.st.WebhookOf(r.Context(), acct, org, project, name)
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
			"%s has a webhook already (enabled by %s); its secret is not shown again: replace it with --rotate (legate pipeline webhook enable %s --rotate), or disable it first",
			pipelineLabel(name, org, project), cur.EnabledBy, name)
		return
	case err != nil:
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	}
	svc.log.Info("pipeline webhook enabled", "account", acct, "pipeline", name, "org", org, "project", project, "webhook", stored.ID,
		"by", stored.EnabledBy, "rotated", stored.ID != h.ID)
	status := http.StatusCreated
	if stored.ID != h.ID {
		status = http.StatusOK
	}
	api.WriteJSON(w, status, protocol.WebhookSecret{PipelineWebhook: *webhookView(stored), Secret: secret})
}

func (svc *Service) handleDisableWebhook(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource, e.Org, e.Project = name, org, project })
	if err := svc.st.DeleteWebhook(r.Context(), acct, org, project, name); err != nil {
		api.StoreError(w, err, "the webhook of "+pipelineLabel(name, org, project))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// signedDelivery is what the headers of a delivery say: when it was
// signed, its ID and the signature.
type signedDelivery struct {
	ts  string // as sent: the signed text
	at  time.Time
	id  string
	sum []byte
}

// parseDelivery reads the headers that sign a delivery:
// HeaderLegateTimestamp (Unix seconds), HeaderLegateDelivery (letters,
// digits, '-' and '_', at most maxDeliveryLen) and
// HeaderLegateSignature256 ("sha256=" and 64 hex digits). A body-only
// GitHub-style signature is refused: it signs no time and no ID, so a
// captured delivery could be sent again for ever.
func parseDelivery(h http.Header) (signedDelivery, error) {
	const how = "sign TIMESTAMP.DELIVERY.BODY (the Unix time in seconds, the delivery ID and the raw body, joined by dots) with HMAC-SHA256 keyed with the webhook's secret; see docs/pipelines.md, Webhooks"
	sig := h.Get(protocol.HeaderLegateSignature256)
	if sig == "" {
		if h.Get(protocol.HeaderHubSignature256) != "" {
			return signedDelivery{}, fmt.Errorf("%s alone signs only the body, so anyone who saw one delivery could send it again: send %s, %s and %s (%s)",
				protocol.HeaderHubSignature256, protocol.HeaderLegateTimestamp, protocol.HeaderLegateDelivery, protocol.HeaderLegateSignature256, how)
		}
		return signedDelivery{}, fmt.Errorf("missing %s header: %s", protocol.HeaderLegateSignature256, how)
	}
	ts := h.Get(protocol.HeaderLegateTimestamp)
	if ts == "" {
		return signedDelivery{}, fmt.Errorf("missing %s header: give the Unix time in seconds when the delivery was signed (date +%%s), and %s", protocol.HeaderLegateTimestamp, how)
	}
	if len(ts) > maxTimestampLen || strings.Trim(ts, "0123456789") != "" {
		return signedDelivery{}, fmt.Errorf("malformed %s header: it must be the Unix time in seconds (date +%%s), at most %d digits", protocol.HeaderLegateTimestamp, maxTimestampLen)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return signedDelivery{}, fmt.Errorf("malformed %s header: %v", protocol.HeaderLegateTimestamp, err)
	}
	id := h.Get(protocol.HeaderLegateDelivery)
	if id == "" {
		return signedDelivery{}, fmt.Errorf("missing %s header: give each delivery an ID of its own (uuidgen) and sign it: %s", protocol.HeaderLegateDelivery, how)
	}
	if err := checkDeliveryID(id); err != nil {
		return signedDelivery{}, err
	}
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return signedDelivery{}, fmt.Errorf("malformed %s header: it must start with sha256= (%s)", protocol.HeaderLegateSignature256, how)
	}
	if len(hexSum) != 2*sha256.Size {
		return signedDelivery{}, fmt.Errorf("malformed %s header: sha256= must be followed by %d hex digits, found %d characters", protocol.HeaderLegateSignature256, 2*sha256.Size, len(hexSum))
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil {
		return signedDelivery{}, fmt.Errorf("malformed %s header: sha256= must be followed by hex digits", protocol.HeaderLegateSignature256)
	}
	return signedDelivery{ts: ts, at: time.Unix(secs, 0), id: id, sum: sum}, nil
}

// checkDeliveryID: letters, digits, '-' and '_' (a UUID), so that the
// dots of the signed text separate its parts unambiguously.
func checkDeliveryID(id string) error {
	ok := len(id) <= maxDeliveryLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		return fmt.Errorf("malformed %s header: a delivery ID is letters, digits, - and _, at most %d characters (a UUID: uuidgen)", protocol.HeaderLegateDelivery, maxDeliveryLen)
	}
	return nil
}

// signatureOK reports whether d's signature is the HMAC-SHA256 under
// secret of its timestamp, its ID and body, in constant time.
func signatureOK(secret []byte, d signedDelivery, body []byte) bool {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(d.ts + "." + d.id + "."))
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), d.sum)
}

// handleHook is a webhook delivery. Unknown ID: 404 (the ID is 128 random
// bits, so telling it apart from a bad signature helps someone who pasted
// an old URL and no one who guesses); bad signature, or signed outside the
// window: 401, logged and counted; a delivery ID seen already: 409; then
// whether the webhook is suspended, the payload, who the webhook acts as,
// and the run.
func (svc *Service) handleHook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	h, d, body, ok := svc.authenticDelivery(w, r)
	if !ok {
		return
	}
	label := pipelineLabel(h.Pipeline, h.Org, h.Project)
	if h.SuspendedReason != "" {
		svc.log.Info("webhook delivery refused: suspended", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID, "delivery", d.id)
		api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden,
			"the webhook of %s is suspended since %s: %s; someone who may run the pipeline enables it again with legate pipeline webhook enable %s --rotate (and gives the sender the new secret)",
			label, h.SuspendedAt.UTC().Format(time.RFC3339), h.SuspendedReason, h.Pipeline)
		return
	}
	if r.Header.Get(protocol.HeaderGitHubEvent) == "ping" {
		api.WriteJSON(w, http.StatusOK, protocol.WebhookPing{Pipeline: h.Pipeline, Message: "pong: the signature is good; other events start a run of " + label})
		return
	}
	stored, err := svc.st.GetPipeline(ctx, h.AccountID, h.Org, h.Project, h.Pipeline)
	if err != nil {
		api.StoreError(w, err, label)
		return
	}
	p, err := pipeline.Parse([]byte(stored.Source))
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s (version %d) no longer parses: %v", label, stored.Version, err)
		return
	}
	inputs, err := p.WebhookInputs(body)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if err := svc.webhookMayRun(ctx, h, p, inputs); err != nil {
		var refusal *webhookRefusal
		if errors.As(err, &refusal) {
			svc.log.Info("webhook delivery refused", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID, "err", err)
			api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s", err.Error())
			return
		}
		api.StoreError(w, err, "the enabler of the webhook of "+label)
		return
	}
	// The run is of the version just checked, not of one an edit stores
	// in between.
	run, err := svc.StartRun(ctx, RunStart{AccountID: h.AccountID, Org: h.Org, Project: h.Project, Pipeline: h.Pipeline, Inputs: inputs,
		Trigger: "webhook", TriggeredBy: "webhook:" + h.Pipeline, WebhookID: h.ID, Delivery: d.id, Stored: &stored,
		ActsKind: h.PrincipalKind, ActsID: h.PrincipalID})
	var refused *errRunRefused
	switch {
	case errors.Is(err, store.ErrConflict) && run.ID == "":
		// The ID was used by a delivery before the window (runs keep it).
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
			"delivery %s was accepted already: give each delivery a new ID (uuidgen)", d.id)
		return
	case errors.As(err, &refused):
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", refused.Error())
		return
	case err != nil && run.ID == "":
		api.StoreError(w, err, label)
		return
	case err != nil:
		svc.log.Warn("advance a new pipeline run", "run", run.ID, "err", err)
	}
	api.WriteJSON(w, http.StatusCreated, runView(run))
}

// authenticDelivery finds the webhook of a delivery, checks its signature
// and its timestamp, and remembers its ID; ok false when it answered.
func (svc *Service) authenticDelivery(w http.ResponseWriter, r *http.Request) (h store.Webhook, d signedDelivery, body []byte, ok bool) {
	ctx := r.Context()
	id := r.PathValue("id")
	h, secret, err := svc.st.WebhookByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound,
			"no webhook %s: it was disabled, its pipeline deleted, or the URL is wrong (legate pipeline get NAME shows a pipeline's webhook)", id)
		return h, d, nil, false
	case err != nil:
		if sealErr := svc.secrets.SealError(err); sealErr != nil {
			svc.log.Error("webhook secret does not open", "webhook", id, "err", sealErr)
			api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "webhook %s: internal error", id)
			return h, d, nil, false
		}
		api.StoreError(w, err, "webhook "+id)
		return h, d, nil, false
	}
	body, err = io.ReadAll(r.Body) // api.Server read it before the handler, within bodyWebhook
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "read the body: %v", err)
		return h, d, nil, false
	}
	d, err = parseDelivery(r.Header)
	if err == nil && !signatureOK(secret, d, body) {
		err = fmt.Errorf("the %s signature does not match the delivery: sign %s, \".\", %s, \".\" and the raw body, exactly as sent, with the webhook's current secret (it changes with legate pipeline webhook enable --rotate)",
			protocol.HeaderLegateSignature256, protocol.HeaderLegateTimestamp, protocol.HeaderLegateDelivery)
	}
	if err != nil {
		svc.badSignatures.Inc()
		svc.log.Warn("webhook delivery refused: bad signature", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID,
			"remote", r.RemoteAddr, "err", err)
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "%s", err.Error())
		return h, d, nil, false
	}
	now := svc.now()
	if skew := now.Sub(d.at); skew > WebhookWindow || skew < -WebhookWindow {
		svc.replays.Inc()
		svc.log.Warn("webhook delivery refused: outside the window", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID,
			"delivery", d.id, "signed_at", d.at, "remote", r.RemoteAddr)
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated,
			"the delivery was signed at %s, more than %s from the manager's time (%s): sign each delivery when it is sent (a delivery sent again is refused), and keep the sender's clock right",
			d.at.UTC().Format(time.RFC3339), WebhookWindow, now.UTC().Format(time.RFC3339))
		return h, d, nil, false
	}
	// Kept for twice the window: another manager whose clock is behind
	// this one's (by up to the window) still finds it.
	err = svc.st.RememberDelivery(ctx, h.ID, d.id, d.at.Add(2*WebhookWindow), maxRememberedDeliveries, now)
	switch {
	case errors.Is(err, store.ErrConflict):
		svc.replays.Inc()
		svc.log.Warn("webhook delivery refused: delivery ID seen already", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID,
			"delivery", d.id, "remote", r.RemoteAddr)
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
			"delivery %s was accepted already: a delivery is accepted once; send a new one with a new ID (uuidgen) and timestamp", d.id)
		return h, d, nil, false
	case errors.Is(err, store.ErrTooManyDeliveries):
		api.WriteError(w, http.StatusTooManyRequests, protocol.CodeRateLimited,
			"the webhook of %s accepted %d deliveries in the last %s: send fewer", pipelineLabel(h.Pipeline, h.Org, h.Project), maxRememberedDeliveries, 2*WebhookWindow)
		return h, d, nil, false
	case err != nil:
		api.StoreError(w, err, "the delivery "+d.id)
		return h, d, nil, false
	}
	return h, d, body, true
}

// webhookRefusal: the principal a webhook acts as may not run its pipeline
// (any more).
type webhookRefusal struct{ msg string }

func (e *webhookRefusal) Error() string { return e.msg }

// webhookMayRun checks, now, what a manual run of the pipeline by the
// webhook's principal would need: that it still exists and is enabled,
// pipeline:execute at the pipeline's scope, and access to what its steps
// use.
func (svc *Service) webhookMayRun(ctx context.Context, h store.Webhook, p *pipeline.Pipeline, inputs map[string]string) error {
	label := pipelineLabel(h.Pipeline, h.Org, h.Project)
	fix := fmt.Sprintf("someone who may run it can take the webhook over (legate pipeline webhook enable %s --rotate) and give the sender the new secret", h.Pipeline)
	pol, disabled, err := svc.principals.PolicyOf(ctx, h.AccountID, h.PrincipalKind, h.PrincipalID)
	switch {
	case err != nil:
		return err
	case pol == nil:
		return &webhookRefusal{fmt.Sprintf("the webhook of %s acts as %s, who was deleted; %s", label, h.EnabledBy, fix)}
	case disabled:
		return &webhookRefusal{fmt.Sprintf("the webhook of %s acts as %s, who is disabled; %s", label, h.EnabledBy, fix)}
	}
	reason, err := svc.needsOf(ctx, pol, h.AccountID, h.Org, h.Project, p, inputs)
	if err != nil {
		return err
	}
	if reason != "" {
		return &webhookRefusal{fmt.Sprintf("the webhook of %s acts as %s, who may no longer run it: %s; %s", label, h.EnabledBy, reason, fix)}
	}
	return nil
}

// WebhookWindow is how far from the manager's clock a delivery's signed
// timestamp may be, either way; a delivery ID is remembered until its
// timestamp is twice that far in the past (managers' clocks may differ).
const WebhookWindow = 5 * time.Minute
