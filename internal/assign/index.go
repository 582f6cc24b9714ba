package assign

import (
	"math"
	"slices"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Index keeps a fleet of delegates grouped by scope and by selector, each
// group in least-loaded order, so that choosing whom to offer a task costs
// about the number of delegates looked at before the k best eligible ones
// are found, not the size of the fleet. Its answer is Rank's, for the seed
// the index was made with (a property test holds it to that).
//
// The index caches, per delegate, what does not change while it is
// connected (instance ID, name, hostname, tags, scope) and its load
// (Running, Capacity), which decides the order. Everything else — liveness,
// draining, thresholds, capacity, the deny list, capabilities — is checked
// on a fresh view of each delegate looked at (the view function), with the
// rules of Evaluate; a stale load only changes the order, never who is
// eligible. H is the caller's handle of a delegate (the manager's live
// state). An Index is not safe for concurrent use; the caller locks it.
type Index[H any] struct {
	seed   uint64
	rnd    uint64 // treap priorities (xorshift)
	byID   map[string]*indexEntry[H]
	scopes map[string]*treap[H] // scopeKey -> delegates of that scope
	sels   map[string]*treap[H] // normalized selector -> delegates with it
}

type indexEntry[H any] struct {
	h    H
	id   string
	sc   string   // scopeKey of the delegate
	sels []string // its normalized selectors: tags, name, hostname
	key  indexKey
}

// indexKey orders the delegates of a group: the rank keys of the "other"
// tier (load, then Running and the tie hash), then the instance ID.
type indexKey struct {
	key, sub uint64
	id       string
}

func (a indexKey) less(b indexKey) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.sub != b.sub {
		return a.sub < b.sub
	}
	return a.id < b.id
}

// NewIndex returns an empty index whose ties between equally loaded
// delegates are broken by a hash of seed and instance ID, as Rank does for
// that seed.
func NewIndex[H any](seed uint64) *Index[H] {
	return &Index[H]{
		seed: seed, rnd: seed | 1,
		byID:   map[string]*indexEntry[H]{},
		scopes: map[string]*treap[H]{},
		sels:   map[string]*treap[H]{},
	}
}

// Len is the number of delegates in the index.
func (x *Index[H]) Len() int { return len(x.byID) }

func scopeKey(org, project string) string {
	switch {
	case org == "":
		return ""
	case project == "":
		return org + "\x00"
	default:
		return org + "\x00" + project
	}
}

func (x *Index[H]) rankKey(id string, running, capacity int) indexKey {
	r := uint64(min(max(running, 0), 1<<32-1))
	return indexKey{
		key: tierOther<<62 | math.Float64bits(load(running, capacity)),
		sub: r<<32 | tieKey(x.seed, id)&(1<<32-1),
		id:  id,
	}
}

// Put adds a delegate under handle h, or replaces the one with the same
// instance ID. Only d's instance ID, name, hostname, tags, scope, Running
// and Capacity are kept.
func (x *Index[H]) Put(h H, d Delegate) {
	x.Remove(d.InstanceID)
	e := &indexEntry[H]{h: h, id: d.InstanceID, sc: scopeKey(d.Org, d.Project), key: x.rankKey(d.InstanceID, d.Running, d.Capacity)}
	for _, s := range append([]string{d.Name, d.Hostname}, d.Tags...) {
		if n := protocol.NormalizeSelector(s); n != "" && !slices.Contains(e.sels, n) {
			e.sels = append(e.sels, n)
		}
	}
	x.byID[e.id] = e
	x.insert(x.scopes, e.sc, e)
	for _, s := range e.sels {
		x.insert(x.sels, s, e)
	}
}

// Remove takes a delegate out of the index (nothing if it is not in it).
func (x *Index[H]) Remove(id string) {
	e := x.byID[id]
	if e == nil {
		return
	}
	delete(x.byID, id)
	x.delete(x.scopes, e.sc, e)
	for _, s := range e.sels {
		x.delete(x.sels, s, e)
	}
}

// SetLoad records a delegate's running tasks and capacity, moving it in
// the least-loaded order. It costs O(log n) per group the delegate is in
// when the order changes, nothing otherwise.
func (x *Index[H]) SetLoad(id string, running, capacity int) {
	e := x.byID[id]
	if e == nil {
		return
	}
	k := x.rankKey(id, running, capacity)
	if k == e.key {
		return
	}
	x.delete(x.scopes, e.sc, e)
	for _, s := range e.sels {
		x.delete(x.sels, s, e)
	}
	e.key = k
	x.insert(x.scopes, e.sc, e)
	for _, s := range e.sels {
		x.insert(x.sels, s, e)
	}
}

func (x *Index[H]) insert(groups map[string]*treap[H], g string, e *indexEntry[H]) {
	t := groups[g]
	if t == nil {
		t = &treap[H]{}
		groups[g] = t
	}
	x.rnd ^= x.rnd << 13
	x.rnd ^= x.rnd >> 7
	x.rnd ^= x.rnd << 17
	t.insert(e, x.rnd)
}

func (x *Index[H]) delete(groups map[string]*treap[H], g string, e *indexEntry[H]) {
	t := groups[g]
	if t == nil {
		return
	}
	t.delete(e.key)
	if t.n == 0 {
		delete(groups, g)
	}
}

// Offer returns the handles of the delegates to offer t first, in Rank's
// order, and how many of them lead for a reason (the preferred instance
// and those allowlisted for every capability): at most k of those, then at
// most k of the others. That is Rank's ranked[:min(k, preferred)] followed
// by ranked[preferred:preferred+k], with preferred = min(k, preferred).
// k < 1 counts as 1. view returns the current state of a delegate;
// eligibility is decided on it. The handles are appended to buf[:0].
//
// It walks, in least-loaded order, the smallest group that holds every
// delegate that could be eligible (the delegates with the task's rarest
// selector, or those of the scopes that cover the task's) until it has k
// eligible others and the allowlisted ones it needs, so an offer costs
// about the number of delegates looked at. When finding the allowlisted
// ones that way would look at more delegates than have a result for the
// task's rarest capability, it reads those results instead.
func (x *Index[H]) Offer(p Policy, t Task, caps *Capabilities, now time.Time, k int, view func(H) Delegate, buf []H) (order []H, preferred int) {
	k = max(k, 1)
	order = buf[:0]
	v := caps.view()
	defer v.done()
	tv := prepare(&t, v)
	w := offerWalk[H]{x: x, p: p, tv: &tv, now: now, view: view, k: k}

	// Tier 0: the preferred instance.
	pref := w.preferredEntry(t.PreferInstance)
	if pref != nil {
		order = append(order, pref.h)
		preferred++
	}
	w.pref = pref
	// The groups to walk: the smallest that holds every delegate that
	// could be eligible.
	var groups []*treap[H]
	if len(tv.sel) > 0 {
		best := x.rarestSelector(tv.sel)
		if best == nil {
			return order, preferred // nobody has this selector
		}
		groups = append(groups, best)
	}
	if cover := x.covering(t.Org, t.Project); len(groups) == 0 || sumN(cover) < groups[0].n {
		groups = cover
	}

	// Tier 1 (allowlisted for every capability; at most k-preferred of
	// them) and tier 2 (the others; at most k) from one walk of each group
	// in least-loaded order. Every allowlisted delegate has an entry in
	// each capability's map, so when the walk would have to look at more
	// delegates than the smallest map holds to find the allowlisted ones,
	// the map is read instead.
	w.want1, w.small = wantAllowlisted(&tv, k-preferred)
	var c offerTiers[H]
	walked1 := true // every group's walk found all the tier 1 it could
	for _, g := range groups {
		if !w.walkGroup(g, &c) {
			walked1 = false
		}
	}
	if w.want1 > 0 && !walked1 {
		c.tier1 = w.readAllowlisted(c.tier1[:0])
	}
	order = appendBest(order, c.tier1, w.want1)
	preferred += min(len(c.tier1), w.want1)
	order = appendBest(order, c.others, k)
	return order, preferred
}

// offerCand is a delegate Offer found eligible, with the rank key of its
// fresh load.
type offerCand[H any] struct {
	key indexKey
	h   H
}

func compareCand[H any](a, b offerCand[H]) int {
	if a.key.less(b.key) {
		return -1
	}
	return 1
}

// appendBest sorts cs by rank key and appends the handles of the first n
// of them to order.
func appendBest[H any](order []H, cs []offerCand[H], n int) []H {
	slices.SortFunc(cs, compareCand[H])
	for _, c := range cs[:min(len(cs), n)] {
		order = append(order, c.h)
	}
	return order
}

// offerWalk is one Offer's search: the task, how to judge a delegate and
// how many of each tier it wants. Nothing read from it may reach the heap
// (the candidates found are kept apart, in offerTiers), or escape analysis,
// which does not tell its fields apart, moves the task and its view there.
type offerWalk[H any] struct {
	x    *Index[H]
	p    Policy
	tv   *taskView
	now  time.Time
	view func(H) Delegate

	k     int                 // tier 2 (the others): at most k
	want1 int                 // tier 1 (allowlisted for every capability): at most want1
	small map[string]capState // the smallest capability map: it holds every allowlisted delegate
	pref  *indexEntry[H]      // tier 0, the preferred instance (nil: none)
}

// offerTiers are the candidates an Offer has found: tier 1 (allowlisted
// for every capability) and tier 2 (the others).
type offerTiers[H any] struct {
	tier1, others []offerCand[H]
}

// preferredEntry returns the entry of the task's preferred instance when
// it is in the index and eligible, nil otherwise.
func (w *offerWalk[H]) preferredEntry(id string) *indexEntry[H] {
	if id == "" {
		return nil
	}
	e := w.x.byID[id]
	if e == nil {
		return nil
	}
	d := w.view(e.h)
	if ok, _ := w.p.eligible(&d, w.tv, w.now); !ok {
		return nil
	}
	return e
}

// rarestSelector returns the group of the selector that the fewest
// delegates have, nil when nobody has one of them.
func (x *Index[H]) rarestSelector(sel []string) *treap[H] {
	var best *treap[H]
	for _, s := range sel {
		g := x.sels[s]
		if g == nil {
			return nil
		}
		if best == nil || g.n < best.n {
			best = g
		}
	}
	return best
}

// wantAllowlisted returns how many allowlisted delegates to look for
// (room, when the task needs capabilities and somebody has a result for
// them) and the smallest capability map, which holds every one of them.
func wantAllowlisted(tv *taskView, room int) (want1 int, small map[string]capState) {
	if len(tv.capMaps) == 0 {
		return 0, nil
	}
	small = tv.capMaps[0]
	for _, cm := range tv.capMaps[1:] {
		if len(cm) < len(small) {
			small = cm
		}
	}
	if len(small) == 0 {
		return 0, small // nobody is allowlisted
	}
	return room, small
}

// walkGroup walks one group in least-loaded order, adding the eligible
// delegates it meets to tier 1 (up to want1) or tier 2 (up to k). It
// stops when it has k others and either the tier 1 it wants or more
// delegates looked at than the smallest capability map holds; it reports
// false when it stopped that way short of the tier 1 it wants.
func (w *offerWalk[H]) walkGroup(g *treap[H], c *offerTiers[H]) (walked1 bool) {
	found1, found2, looked := 0, 0, 0
	exhausted := true
	g.walk(func(e *indexEntry[H]) bool {
		if found2 >= w.k && (found1 >= w.want1 || looked > len(w.small)) {
			exhausted = false
			return false
		}
		looked++
		if e == w.pref {
			return true
		}
		d := w.view(e.h)
		ok, allow := w.p.eligible(&d, w.tv, w.now)
		if !ok {
			return true
		}
		// The order of the walk is the cached load's; the fresh one
		// decides among the candidates, as in Rank.
		cand := offerCand[H]{w.x.rankKey(e.id, d.Running, d.Capacity), e.h}
		switch {
		case allow && found1 < w.want1:
			c.tier1 = append(c.tier1, cand)
			found1++
		case !allow && found2 < w.k:
			c.others = append(c.others, cand)
			found2++
		}
		return true
	})
	return exhausted || found1 >= w.want1
}

// readAllowlisted appends to tier1 the eligible allowlisted delegates of
// the smallest capability map, for when a walk stopped short of them.
func (w *offerWalk[H]) readAllowlisted(tier1 []offerCand[H]) []offerCand[H] {
	for id, s := range w.small {
		if !s.ok || !s.live(w.now) {
			continue
		}
		e := w.x.byID[id]
		if e == nil || e == w.pref {
			continue
		}
		d := w.view(e.h)
		if ok, allow := w.p.eligible(&d, w.tv, w.now); ok && allow {
			tier1 = append(tier1, offerCand[H]{w.x.rankKey(id, d.Running, d.Capacity), e.h})
		}
	}
	return tier1
}

// covering returns the groups of the scopes that cover a task of org and
// project (see protocol.Covers).
func (x *Index[H]) covering(org, project string) []*treap[H] {
	var gs []*treap[H]
	add := func(key string) {
		if g := x.scopes[key]; g != nil && !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	add("")
	if org != "" {
		add(scopeKey(org, ""))
		if project != "" {
			add(scopeKey(org, project))
		}
	}
	return gs
}

func sumN[H any](gs []*treap[H]) int {
	n := 0
	for _, g := range gs {
		n += g.n
	}
	return n
}

// treap is an ordered set of index entries by their key.
type treap[H any] struct {
	root *tnode[H]
	n    int
}

type tnode[H any] struct {
	e           *indexEntry[H]
	prio        uint64
	left, right *tnode[H]
}

func (t *treap[H]) insert(e *indexEntry[H], prio uint64) {
	t.root = tinsert(t.root, &tnode[H]{e: e, prio: prio})
	t.n++
}

func tinsert[H any](n, nn *tnode[H]) *tnode[H] {
	if n == nil {
		return nn
	}
	if nn.prio > n.prio {
		nn.left, nn.right = tsplit(n, nn.e.key)
		return nn
	}
	if nn.e.key.less(n.e.key) {
		n.left = tinsert(n.left, nn)
	} else {
		n.right = tinsert(n.right, nn)
	}
	return n
}

// tsplit splits n into the keys below k and the others.
func tsplit[H any](n *tnode[H], k indexKey) (l, r *tnode[H]) {
	if n == nil {
		return nil, nil
	}
	if n.e.key.less(k) {
		n.right, r = tsplit(n.right, k)
		return n, r
	}
	l, n.left = tsplit(n.left, k)
	return l, n
}

func tmerge[H any](l, r *tnode[H]) *tnode[H] {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = tmerge(l.right, r)
		return l
	default:
		r.left = tmerge(l, r.left)
		return r
	}
}

func (t *treap[H]) delete(k indexKey) {
	p := &t.root
	for n := *p; n != nil; n = *p {
		switch {
		case k.less(n.e.key):
			p = &n.left
		case n.e.key.less(k):
			p = &n.right
		default:
			*p = tmerge(n.left, n.right)
			t.n--
			return
		}
	}
}

// walk calls f on the entries in key order until f returns false.
func (t *treap[H]) walk(f func(*indexEntry[H]) bool) {
	var stack []*tnode[H]
	n := t.root
	for n != nil || len(stack) > 0 {
		for n != nil {
			stack = append(stack, n)
			n = n.left
		}
		n = stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !f(n.e) {
			return
		}
		n = n.right
	}
}

// Get returns the handle of a delegate in the index.
func (x *Index[H]) Get(id string) (h H, ok bool) {
	if e := x.byID[id]; e != nil {
		return e.h, true
	}
	return h, false
}
