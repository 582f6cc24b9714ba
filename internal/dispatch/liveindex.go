package dispatch

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/assign"
)

// liveIndex keeps the live delegates of each account in an assign.Index,
// so an offer looks at the best few eligible delegates instead of viewing
// and ranking them all. The hub updates it when a delegate connects or
// goes; a delegate updates its load (tasks running and offered to it
// alone, capacity) whenever that changes. Lock order: hub.mu, then
// liveIndex.mu, then live.mu; nothing takes liveIndex.mu while holding a
// live's mu.
type liveIndex struct {
	mu        sync.RWMutex
	seed      uint64
	byAccount map[string]*assign.Index[*live]
}

func newLiveIndex() *liveIndex {
	return &liveIndex{seed: rand.Uint64(), byAccount: map[string]*assign.Index[*live]{}}
}

func (x *liveIndex) put(l *live) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ix := x.byAccount[l.accountID]
	if ix == nil {
		ix = assign.NewIndex[*live](x.seed)
		x.byAccount[l.accountID] = ix
	}
	ix.Put(l, delegateView(l))
}

func (x *liveIndex) remove(l *live) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ix := x.byAccount[l.accountID]
	if ix == nil {
		return
	}
	if cur, ok := ix.Get(l.id); ok && cur == l {
		ix.Remove(l.id)
	}
	if ix.Len() == 0 {
		delete(x.byAccount, l.accountID)
	}
}

// setLoad moves l to its current place in the least-loaded order (if it
// is the incarnation the index holds).
func (x *liveIndex) setLoad(l *live) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ix := x.byAccount[l.accountID]
	if ix == nil {
		return
	}
	if cur, ok := ix.Get(l.id); !ok || cur != l {
		return
	}
	l.mu.Lock()
	running, capacity := len(l.running)+len(l.pending), l.capacity
	l.mu.Unlock()
	ix.SetLoad(l.id, running, capacity)
}

// offer returns the delegates of an account to offer t to: at most k of
// the preferred group (the connector's last successful delegate, those
// allowlisted for all of t's capabilities), then at most k of the others,
// each in offer order (assign.Index.Offer).
func (x *liveIndex) offer(accountID string, pol assign.Policy, t assign.Task, caps *assign.Capabilities, now time.Time, k int) ([]*live, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ix := x.byAccount[accountID]
	if ix == nil {
		return nil, 0
	}
	return ix.Offer(pol, t, caps, now, k, delegateView, nil)
}
