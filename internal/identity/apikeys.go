package identity

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// API keys authenticate admin requests; each acts for its account (its
// owner: protocol.OwnerAccount today). Only a key's SHA-256 hash is
// stored: a key is 24 random bytes, so a fast hash is as strong as a slow
// one would be (there is nothing to guess), and it lets one indexed
// lookup find the key.
//
// The service caches the keys it has seen, by hash, for at most
// Config.APIKeyCacheTTL, so that a request costs no database read. A
// revocation drops the key from the revoking manager's cache at once and
// reaches the other managers on the same database by broadcast; should a
// broadcast be lost, the TTL bounds how long they keep accepting the key.
//
// When a key was last used is recorded off the request path: requests
// note it in memory, and the manager's flush loop writes it
// (FlushAPIKeyUse) at most once a minute per key.

// defaultAPIKeyCacheTTL is how long a cached API key is trusted without
// reading it again, unless Config.APIKeyCacheTTL says otherwise.
const defaultAPIKeyCacheTTL = 5 * time.Second

// apiKeyPrefix starts every API key value, so that a key found in a file
// or a log says what it is.
const apiKeyPrefix = "lgk_"

// apiKeyUseInterval is the least time between two writes of one key's
// last use.
const apiKeyUseInterval = time.Minute

// apiKeyCache holds the API keys this manager has seen and when each was
// last used. Its zero value is ready to use.
type apiKeyCache struct {
	mu      sync.Mutex
	entries map[string]apiKeyEntry // by hash
	// gen changes with every invalidation, so a lookup that read the
	// store before a revocation does not cache what it read after it.
	gen uint64
	use map[string]*apiKeyUse // by key ID
}

type apiKeyEntry struct {
	key    store.APIKey
	loaded time.Time
}

type apiKeyUse struct {
	last      time.Time // the latest use seen here
	written   time.Time // the latest use known to be stored
	flushedAt time.Time // when this manager last wrote it
	warnedAt  time.Time // when a use of the revoked key was last logged
}

// lookup returns the cached key with this hash if it was loaded less than
// ttl ago (ok), and the generation to pass to put otherwise.
func (c *apiKeyCache) lookup(hash string, now time.Time, ttl time.Duration) (k store.APIKey, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, found := c.entries[hash]; found && now.Sub(e.loaded) < ttl {
		return e.key, c.gen, true
	}
	return store.APIKey{}, c.gen, false
}

// put caches k, read from the store, unless an invalidation happened
// since gen was read.
func (c *apiKeyCache) put(k store.APIKey, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.entries == nil {
		c.entries = map[string]apiKeyEntry{}
	}
	c.entries[k.Hash] = apiKeyEntry{key: k, loaded: now}
	if k.LastUsedAt != nil {
		if u := c.useOf(k.ID); u.written.Before(*k.LastUsedAt) {
			u.written = *k.LastUsedAt
		}
	}
}

// revoked caches k as this manager just revoked it.
func (c *apiKeyCache) revoked(k store.APIKey, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.entries == nil {
		c.entries = map[string]apiKeyEntry{}
	}
	c.entries[k.Hash] = apiKeyEntry{key: k, loaded: now}
}

// invalidate drops the key with this ID: its next use reads the store.
func (c *apiKeyCache) invalidate(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.entries {
		if e.key.ID == id {
			delete(c.entries, h)
		}
	}
}

func (c *apiKeyCache) useOf(id string) *apiKeyUse {
	if c.use == nil {
		c.use = map[string]*apiKeyUse{}
	}
	u := c.use[id]
	if u == nil {
		u = &apiKeyUse{}
		c.use[id] = u
	}
	return u
}

// used notes that key id authenticated a request at now.
func (c *apiKeyCache) used(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u := c.useOf(id); now.After(u.last) {
		u.last = now
	}
}

// lastUse is the latest use of key id this manager knows of (stored or
// not yet), or nil.
func (c *apiKeyCache) lastUse(id string, stored *time.Time) *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.use[id]
	if u == nil || u.last.IsZero() || (stored != nil && !u.last.After(*stored)) {
		return stored
	}
	t := u.last
	return &t
}

// due returns the uses to write now: keys used since their last write,
// written by this manager at least apiKeyUseInterval ago (or never).
func (c *apiKeyCache) due(now time.Time) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string]time.Time
	for id, u := range c.use {
		if u.last.After(u.written) && (u.flushedAt.IsZero() || now.Sub(u.flushedAt) >= apiKeyUseInterval) {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[id] = u.last
		}
	}
	return out
}

// wrote records that the uses in batch were written at now.
func (c *apiKeyCache) wrote(batch map[string]time.Time, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, at := range batch {
		u := c.useOf(id)
		if u.written.Before(at) {
			u.written = at
		}
		u.flushedAt = now
	}
}

// shouldWarn reports whether a use of the revoked key id is worth a log
// line: at most one per key and minute.
func (c *apiKeyCache) shouldWarn(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.useOf(id)
	if !u.warnedAt.IsZero() && now.Sub(u.warnedAt) < apiKeyUseInterval {
		return false
	}
	u.warnedAt = now
	return true
}

// apiKeyTTL is the configured cache TTL.
func (s *Service) apiKeyTTL() time.Duration {
	if s.cfg.APIKeyCacheTTL > 0 {
		return s.cfg.APIKeyCacheTTL
	}
	return defaultAPIKeyCacheTTL
}

// apiKey returns the key (revoked or not) whose value hashes to hash, from
// the cache or the store; store.ErrNotFound for an unknown key.
func (s *Service) apiKey(ctx context.Context, hash string) (store.APIKey, error) {
	now := s.cfg.Now()
	k, gen, ok := s.apiKeys.lookup(hash, now, s.apiKeyTTL())
	if ok {
		return k, nil
	}
	k, err := s.st.APIKeyByHash(ctx, hash)
	if err != nil {
		return store.APIKey{}, err
	}
	s.apiKeys.put(k, now, gen)
	return k, nil
}

// FlushAPIKeyUse writes the last use of the keys that are due.
func (s *Service) FlushAPIKeyUse(ctx context.Context) {
	now := s.cfg.Now()
	batch := s.apiKeys.due(now)
	if len(batch) == 0 {
		return
	}
	if err := s.st.TouchAPIKeys(ctx, batch); err != nil {
		s.log.Warn("record API key use", "err", err, "keys", len(batch))
		return
	}
	s.apiKeys.wrote(batch, now)
}

// apiKeyNames maps the IDs of an account's keys to their names.
func apiKeyNames(keys []store.APIKey) map[string]string {
	names := make(map[string]string, len(keys))
	for _, k := range keys {
		names[k.ID] = k.Name
	}
	return names
}

func (s *Service) apiKeyView(k store.APIKey, names map[string]string, current string) protocol.APIKey {
	v := protocol.APIKey{
		Name: k.Name, Status: protocol.TokenActive, CreatedAt: k.CreatedAt.UTC(),
		CreatedBy: names[k.CreatedBy], LastUsedAt: api.UTC(s.apiKeys.lastUse(k.ID, k.LastUsedAt)),
		RevokedAt: api.UTC(k.RevokedAt), RevokedBy: names[k.RevokedBy],
		OwnerKind: k.OwnerKind, OwnerID: k.OwnerID, Owner: names[k.OwnerID], Current: k.ID == current,
	}
	if k.RevokedAt != nil {
		v.Status = protocol.TokenRevoked
	}
	return v
}

func (s *Service) handleCreateAPIKey(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateAPIKeyRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if !protocol.ValidName(req.Name) {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "API key name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
		return
	}
	caller := api.CallerOf(r.Context()).Key
	c := api.CallerOf(r.Context())
	ownerKind, ownerID, ownerName := c.Policy.Principal.Kind, c.Policy.Principal.ID, c.Policy.Principal.Name
	if req.Owner = strings.TrimSpace(req.Owner); req.Owner != "" && req.Owner != ownerName {
		if !c.MayManageOthers() {
			api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s lacks the permission %s at account scope, which creating a key for %q needs",
				c.Policy.Principal, access.UserManage, req.Owner)
			return
		}
		p, err := s.st.GetPrincipal(r.Context(), acct, req.Owner)
		if err != nil {
			api.StoreError(w, err, "user "+strconv.Quote(req.Owner))
			return
		}
		if p.Disabled {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s %s is disabled; enable it first (legate user enable %s)", kindWord(p.Kind), p.Name, p.Name)
			return
		}
		ownerKind, ownerID, ownerName = p.Kind, p.ID, p.Name
	}
	value := api.NewSecret(apiKeyPrefix, 24)
	k := store.APIKey{ID: api.NewID("ak_"), AccountID: acct, Name: req.Name, Hash: api.HashSecret(value),
		OwnerKind: ownerKind, OwnerID: ownerID, CreatedAt: s.cfg.Now(), CreatedBy: caller.ID}
	if err := s.st.CreateAPIKey(r.Context(), k); err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "an API key named %q already exists (revoked keys keep their name); choose another name", req.Name)
			return
		}
		api.StoreError(w, err, "API key")
		return
	}
	s.log.Info("API key created", "account", acct, "key", k.Name, "owner", ownerName, "by", c.Policy.Principal.Name)
	v := s.apiKeyView(k, map[string]string{caller.ID: caller.Name, ownerID: ownerName}, caller.ID)
	v.Value = value
	api.WriteJSON(w, http.StatusCreated, v)
}

func (s *Service) handleListAPIKeys(w http.ResponseWriter, r *http.Request, acct string) {
	keys, err := s.st.ListAPIKeys(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "API keys")
		return
	}
	names := apiKeyNames(keys)
	if owners, err := s.names(r.Context(), acct); err == nil {
		for id, n := range owners {
			names[id] = n
		}
	}
	caller := api.CallerOf(r.Context()).Key
	c := api.CallerOf(r.Context())
	all := c.Policy.Allows(access.UserView, access.Account)
	out := protocol.APIKeyList{APIKeys: make([]protocol.APIKey, 0, len(keys))}
	for _, k := range keys {
		if all || k.OwnerID == c.Policy.Principal.ID {
			out.APIKeys = append(out.APIKeys, s.apiKeyView(k, names, caller.ID))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// handleRevokeAPIKey revokes a key of the account. What protects users
// from locking themselves out: the account's last active key is revoked
// only with force (it can only be the caller's own key). Revoking one's
// own key while another active key exists is allowed.
func (s *Service) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.RevokeAPIKeyRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	caller := api.CallerOf(r.Context()).Key
	c := api.CallerOf(r.Context())
	if !c.MayManageOthers() {
		keys, err := s.st.ListAPIKeys(r.Context(), acct)
		if err != nil {
			api.StoreError(w, err, "API keys")
			return
		}
		for _, k := range keys {
			if k.Name == name && k.OwnerID != c.Policy.Principal.ID {
				api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s lacks the permission %s at account scope, which revoking another's API key needs",
					c.Policy.Principal, access.UserManage)
				return
			}
		}
	}
	k, err := s.st.RevokeAPIKey(r.Context(), acct, name, caller.ID, s.cfg.Now(), req.Force)
	if err != nil {
		if errors.Is(err, store.ErrLastAPIKey) {
			self := ""
			if name == caller.Name {
				self = "the key this request uses and "
			}
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
				"API key %q is %sthe account's last active key: revoking it locks the account out of the API until a manager restarts and writes a new key to DATA/admin.env. Create another key first (legate apikey create NAME) and use it, or revoke anyway with --force",
				name, self)
			return
		}
		api.StoreError(w, err, "API key "+strconv.Quote(name))
		return
	}
	s.apiKeys.revoked(k, s.cfg.Now())
	// The other managers drop it from their caches (a repeated revoke
	// broadcasts again, in case the first broadcast was lost).
	s.bus.Broadcast(r.Context(), cluster.Event{Kind: cluster.APIKeyRevoke, Account: acct, APIKey: k.ID})
	s.log.Info("API key revoked", "account", acct, "key", k.Name, "by", caller.Name, "forced", req.Force)
	names := map[string]string{caller.ID: caller.Name}
	if keys, err := s.st.ListAPIKeys(r.Context(), acct); err == nil {
		names = apiKeyNames(keys)
	}
	api.WriteJSON(w, http.StatusOK, s.apiKeyView(k, names, caller.ID))
}
