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
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Pipeline webhooks, the GitHub convention: POST PathHooks/{id} with the
// body signed in X-Hub-Signature-256 starts a run of the webhook's
// pipeline, inputs taken from the JSON payload. The webhook acts as the
// principal who enabled it (or last rotated its secret), checked at every
// delivery as a manual run by that principal would be.

// bodyWebhook: a GitHub payload is at most 25 MB, but the ones a
// pipeline starts from (push, release, a CI system's call) are tens of
// KiB; 1 MiB keeps a flood of unauthenticated bodies small.
const bodyWebhook = 1 << 20

// maxDeliveryLen bounds a delivery ID (GitHub's are UUIDs).
const maxDeliveryLen = 200

// webhookPath is the URL path of webhook id.
func webhookPath(id string) string { return protocol.PathHooks + "/" + id }

func webhookView(h store.Webhook) *protocol.PipelineWebhook {
	return &protocol.PipelineWebhook{Path: webhookPath(h.ID), EnabledBy: h.EnabledBy, CreatedAt: h.CreatedAt, RotatedAt: h.RotatedAt}
}

func (svc *Service) handleEnableWebhook(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	var req protocol.EnableWebhookRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	pr := api.CallerOf(r.Context()).Policy.Principal
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

// parseSignature reads an X-Hub-Signature-256 value: "sha256=" and 64 hex
// digits (either case), the HMAC-SHA256 of the body.
func parseSignature(v string) ([]byte, error) {
	if v == "" {
		return nil, fmt.Errorf("missing %s header: sign the raw body with the webhook's secret (sha256=HEX of its HMAC-SHA256)", protocol.HeaderHubSignature256)
	}
	hexSum, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return nil, fmt.Errorf("malformed %s header: it must start with sha256= (the HMAC-SHA256 of the raw body, in hex)", protocol.HeaderHubSignature256)
	}
	if len(hexSum) != 2*sha256.Size {
		return nil, fmt.Errorf("malformed %s header: sha256= must be followed by %d hex digits, found %d characters", protocol.HeaderHubSignature256, 2*sha256.Size, len(hexSum))
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil {
		return nil, fmt.Errorf("malformed %s header: sha256= must be followed by hex digits", protocol.HeaderHubSignature256)
	}
	return sum, nil
}

// signatureOK reports whether sum is the HMAC-SHA256 of body under secret,
// in constant time.
func signatureOK(secret, body, sum []byte) bool {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), sum)
}

// handleHook is a webhook delivery. Unknown ID: 404 (the ID is 128 random
// bits, so telling it apart from a bad signature helps someone who pasted
// an old URL and no one who guesses); bad signature: 401, logged and
// counted; then the payload, who the webhook acts as, and the run.
func (svc *Service) handleHook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	h, secret, err := svc.st.WebhookByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound,
			"no webhook %s: it was disabled, its pipeline deleted, or the URL is wrong (legate pipeline get NAME shows a pipeline's webhook)", id)
		return
	case err != nil:
		if sealErr := svc.secrets.SealError(err); sealErr != nil {
			svc.log.Error("webhook secret does not open", "webhook", id, "err", sealErr)
			api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "webhook %s: internal error", id)
			return
		}
		api.StoreError(w, err, "webhook "+id)
		return
	}
	body, err := io.ReadAll(r.Body) // api.Server read it before the handler, within bodyWebhook
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "read the body: %v", err)
		return
	}
	sum, err := parseSignature(r.Header.Get(protocol.HeaderHubSignature256))
	if err == nil && !signatureOK(secret, body, sum) {
		err = fmt.Errorf("the %s signature does not match the body: sign the raw body, exactly as sent, with the webhook's current secret (it changes with legate pipeline webhook enable --rotate)", protocol.HeaderHubSignature256)
	}
	if err != nil {
		svc.badSignatures.Inc()
		svc.log.Warn("webhook delivery refused: bad signature", "account", h.AccountID, "pipeline", h.Pipeline, "webhook", h.ID,
			"remote", r.RemoteAddr, "err", err)
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "%s", err.Error())
		return
	}
	label := pipelineLabel(h.Pipeline, h.Org, h.Project)
	if r.Header.Get(protocol.HeaderGitHubEvent) == "ping" {
		api.WriteJSON(w, http.StatusOK, protocol.WebhookPing{Pipeline: h.Pipeline, Message: "pong: the signature is good; other events start a run of " + label})
		return
	}
	delivery := strings.TrimSpace(r.Header.Get(protocol.HeaderGitHubDelivery))
	if delivery == "" {
		delivery = strings.TrimSpace(r.Header.Get(protocol.HeaderLegateDelivery))
	}
	if len(delivery) > maxDeliveryLen {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "the delivery ID has %d characters: at most %d", len(delivery), maxDeliveryLen)
		return
	}
	if delivery != "" && svc.answerRedelivery(ctx, w, h, delivery) {
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
	run, err := svc.StartRun(ctx, RunStart{AccountID: h.AccountID, Org: h.Org, Project: h.Project, Pipeline: h.Pipeline, Inputs: inputs,
		Trigger: "webhook", TriggeredBy: "webhook:" + h.Pipeline, WebhookID: h.ID, Delivery: delivery,
		ActsKind: h.PrincipalKind, ActsID: h.PrincipalID})
	var refused *errRunRefused
	switch {
	case errors.Is(err, store.ErrConflict) && delivery != "" && run.ID == "":
		// The same delivery arrived twice at once; the other one won.
		if !svc.answerRedelivery(ctx, w, h, delivery) {
			api.StoreError(w, err, "the run of delivery "+delivery)
		}
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

// answerRedelivery answers 200 with the run a delivery started already, if
// it did.
func (svc *Service) answerRedelivery(ctx context.Context, w http.ResponseWriter, h store.Webhook, delivery string) bool {
	run, err := svc.st.RunOfDelivery(ctx, h.ID, delivery)
	if err != nil {
		return false
	}
	if run.AccountID != h.AccountID {
		return false
	}
	api.WriteJSON(w, http.StatusOK, runView(run))
	return true
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
	sc := access.Scope{Org: h.Org, Project: h.Project}
	needs := []api.Need{{Perm: access.PipelineExecute, Res: access.Resource{Kind: "pipeline", Name: h.Pipeline, Scope: sc}}}
	more, err := svc.pipelineNeeds(ctx, h.AccountID, h.Org, h.Project, p, inputs)
	if err != nil {
		return err
	}
	for _, n := range append(needs, more...) {
		if err := pol.Check(n.Perm, n.Res); err != nil {
			return &webhookRefusal{fmt.Sprintf("the webhook of %s acts as %s, who may no longer run it: %v; %s", label, h.EnabledBy, err, fix)}
		}
	}
	return nil
}
