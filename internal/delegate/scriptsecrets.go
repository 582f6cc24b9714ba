package delegate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/transport"
)

// secretEnvPrefix names the environment variables that carry the values
// of stored secrets to INIT_SCRIPT and configuration scripts.
const secretEnvPrefix = "LEGATE_SECRET_"

// scriptSecrets is a delegate-level script with its ${secrets.NAME}
// references rewritten to the environment variables that carry the
// values (${LEGATE_SECRET_NAME}): the script file on disk never holds a
// value, the values are in the script's environment, and masked in its
// output.
type scriptSecrets struct {
	script string
	env    []string // LEGATE_SECRET_NAME=value
	mask   []string // the values
}

// withSecrets rewrites script's references to stored secrets; values
// holds what the manager sent. A name it lacks is an error (missing
// explains why it can be missing); so is a malformed reference. The
// escape $${secrets. becomes the literal text ${secrets., as in tasks.
func withSecrets(script string, values map[string]string, missing func(name string) error) (scriptSecrets, error) {
	if !secretref.Has(script) {
		return scriptSecrets{script: script}, nil
	}
	names, err := secretref.Names(script)
	if err != nil {
		return scriptSecrets{}, err
	}
	out := scriptSecrets{}
	for _, n := range names {
		v, ok := values[n]
		if !ok {
			return scriptSecrets{}, missing(n)
		}
		out.env = append(out.env, secretEnvPrefix+n+"="+v)
		if v != "" {
			out.mask = append(out.mask, v)
		}
	}
	out.script, err = secretref.Expand(script, func(n string) string { return "${" + secretEnvPrefix + n + "}" })
	if err != nil {
		return scriptSecrets{}, fmt.Errorf("rewrite the secret references: %w", err)
	}
	return out, nil
}

// initSecrets gets the stored secrets INIT_SCRIPT references from the
// manager, with the delegate token (the delegate has not registered yet),
// retrying while the manager cannot answer; a refusal (a secret the token
// does not give, an unknown one) is an error that says so.
func (a *Agent) initSecrets(ctx context.Context, script string) (scriptSecrets, error) {
	names, err := secretref.Names(script)
	if err != nil {
		return scriptSecrets{}, fmt.Errorf("INIT_SCRIPT: %w; the delegate does not start", err)
	}
	if len(names) == 0 { // none, or only the escape $${secrets.
		return withSecrets(script, nil, nil)
	}
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second}
	for {
		resp, err := a.client().InitSecrets(ctx, protocol.InitSecretsRequest{AccountID: a.cfg.AccountID, Token: a.cfg.Token, Names: names})
		if err == nil {
			return withSecrets(script, resp.Secrets, func(name string) error {
				return fmt.Errorf("the manager did not give INIT_SCRIPT's stored secret %s; the delegate does not start", name)
			})
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Code.Recoverable() {
			return scriptSecrets{}, fmt.Errorf("INIT_SCRIPT's stored secrets refused by %s: %s; the delegate does not start", a.client().BaseURL(), pe.Message)
		}
		if transport.NeedsOperator(err) {
			return scriptSecrets{}, fmt.Errorf("cannot connect to %s: %w", a.client().BaseURL(), err)
		}
		d := b.Next()
		a.log.Warn("cannot get INIT_SCRIPT's stored secrets yet; retrying", "manager", a.client().BaseURL(), "err", err, "retry_in", d.Round(time.Millisecond))
		a.rotateManager()
		select {
		case <-ctx.Done():
			return scriptSecrets{}, ctx.Err()
		case <-time.After(d):
		}
	}
}
