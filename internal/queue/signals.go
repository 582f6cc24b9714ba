// Package queue computes the queue signals: per account and per distinct
// selector set, how many tasks wait and how long the oldest has waited.
// They come from the store at each read (one aggregate over the queued
// tasks), so every manager sharing a PostgreSQL database answers the same:
// the store is the truth, and no manager keeps a count that a restart or
// a peer's acquire could leave wrong.
package queue

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// MaxSelectorSets is how many selector sets of one account the metrics
// and the list show one by one (the largest queues); the tasks of the
// others are folded into one QueueOtherSelectors bucket, so that the
// series of /metrics stay bounded however many distinct sets tasks carry.
const MaxSelectorSets = 20

// MaxGroupsRead bounds the groups (account and stored selectors) one
// read of the store returns, the largest first: past it, the per-account
// totals still count every task (the "other" bucket), and only the
// eligible count of a set asked for by name can miss tasks of the
// smallest groups.
const MaxGroupsRead = 1000

// MaxQuerySelectors bounds the selectors of one ?selectors= question (an
// autoscaler sends its delegates' tags, name and every pod name up to its
// maximum replicas).
const MaxQuerySelectors = 256

// set is one normalized selector set's queue.
type set struct {
	key    string // the normalized selectors joined by ","
	sels   []string
	queued int
	oldest time.Time
}

// accountSets merges the groups of one account by normalized selector
// set (stored selectors that differ only in case, order or duplicates are
// one set), the largest queues first.
func accountSets(groups []store.QueueGroup, account string) []set {
	by := map[string]*set{}
	for _, g := range groups {
		if g.AccountID != account {
			continue
		}
		sels := protocol.NormalizeSelectors(decodeSelectors(g.Selectors))
		k := strings.Join(sels, ",")
		s := by[k]
		if s == nil {
			s = &set{key: k, sels: sels}
			by[k] = s
		}
		s.queued += g.Queued
		s.oldest = older(s.oldest, g.Oldest)
	}
	out := make([]set, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].queued != out[j].queued {
			return out[i].queued > out[j].queued
		}
		return out[i].key < out[j].key
	})
	return out
}

// decodeSelectors reads a group's stored selectors: a JSON array, or a
// task spec (an object) for tasks stored before selectors had a column.
func decodeSelectors(stored string) []string {
	var spec struct {
		Selectors []string `json:"selectors"`
	}
	if strings.HasPrefix(stored, "{") {
		_ = json.Unmarshal([]byte(stored), &spec) // a stored spec is valid JSON; none reads as no selectors
		return spec.Selectors
	}
	_ = json.Unmarshal([]byte(stored), &spec.Selectors)
	return spec.Selectors
}

func older(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func age(now, since time.Time) int64 {
	if since.IsZero() {
		return 0
	}
	return int64(max(now.Sub(since), 0) / time.Second)
}

// Summarize is the queue of one account: at most MaxSelectorSets sets,
// the largest first, then the other sets folded into one bucket whose
// count is the account's total less the sets shown (so that tasks of
// groups past MaxGroupsRead are counted too).
func Summarize(groups, totals []store.QueueGroup, account string, now time.Time) protocol.QueueSummary {
	var total store.QueueGroup
	for _, t := range totals {
		if t.AccountID == account {
			total = t
		}
	}
	sets := accountSets(groups, account)
	sum := protocol.QueueSummary{Queued: total.Queued, OldestSeconds: age(now, total.Oldest), Sets: []protocol.QueueSignal{}}
	shown, shownOldest := 0, time.Time{}
	for i, s := range sets {
		if i == MaxSelectorSets {
			break
		}
		shown += s.queued
		shownOldest = older(shownOldest, s.oldest)
		sum.Sets = append(sum.Sets, protocol.QueueSignal{Selectors: s.sels, Queued: s.queued, OldestSeconds: age(now, s.oldest)})
	}
	if rest := total.Queued - shown; rest > 0 {
		var oldest time.Time
		for _, s := range sets[min(len(sets), MaxSelectorSets):] {
			oldest = older(oldest, s.oldest)
		}
		// The account's oldest task is in the rest when no set shown
		// holds it (it may sit in a group past MaxGroupsRead).
		if !total.Oldest.IsZero() && (shownOldest.IsZero() || total.Oldest.Before(shownOldest)) {
			oldest = older(oldest, total.Oldest)
		}
		sum.Sets = append(sum.Sets, protocol.QueueSignal{Selectors: []string{}, Other: true, Queued: rest, OldestSeconds: age(now, oldest)})
	}
	return sum
}

// Signal is the queue of one selector set of an account (normalized
// here): the tasks with exactly that set, and the tasks a delegate whose
// tags are that set could take (every selector of the task in the set).
func Signal(groups []store.QueueGroup, account string, selectors []string, now time.Time) protocol.QueueSignal {
	want := protocol.NormalizeSelectors(selectors)
	k := strings.Join(want, ",")
	in := make(map[string]bool, len(want))
	for _, s := range want {
		in[s] = true
	}
	sig := protocol.QueueSignal{Selectors: want}
	var oldest, eligibleOldest time.Time
	for _, s := range accountSets(groups, account) {
		if s.key == k {
			sig.Queued, oldest = s.queued, s.oldest
		}
		if subset(s.sels, in) {
			sig.Eligible += s.queued
			eligibleOldest = older(eligibleOldest, s.oldest)
		}
	}
	sig.OldestSeconds, sig.EligibleOldestSeconds = age(now, oldest), age(now, eligibleOldest)
	return sig
}

func subset(sels []string, in map[string]bool) bool {
	for _, s := range sels {
		if !in[s] {
			return false
		}
	}
	return true
}
