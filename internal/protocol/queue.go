package protocol

import "strconv"

// PathQueue is the queue signals of the caller's account: the tasks that
// wait, per selector set (GET; ?selectors=a,b answers for one set, in
// the shape KEDA's metrics-api scaler and an HPA external metric read).
const PathQueue = "/api/v1/queue"

// QueueOtherSelectors is the selector set, as the list and the metrics
// label write it, of the tasks folded together past the per-account
// bound of selector sets shown one by one.
const QueueOtherSelectors = "(other)"

// QueueSignal is the queue of one selector set: how many tasks wait and
// since how long the longest-waiting one waits.
type QueueSignal struct {
	// Selectors is the set, normalized as matching does (lower case,
	// trimmed, de-duplicated, sorted); empty for tasks without selectors.
	Selectors []string `json:"selectors"`
	// Other marks the bucket of the sets past the bound (Selectors empty).
	Other bool `json:"other,omitempty"`
	// Queued is how many tasks with exactly this selector set wait.
	Queued int `json:"queued"`
	// OldestSeconds is how long the longest-waiting of them has waited
	// since it was queued or requeued, in whole seconds; 0 when none waits.
	OldestSeconds int64 `json:"oldest_seconds"`
	// Eligible is how many queued tasks a delegate carrying exactly these
	// selectors as tags could take: the tasks whose selectors are all in
	// the set (tasks without selectors included). Set only in the answer
	// for one set (?selectors=).
	Eligible int `json:"eligible,omitempty"`
	// EligibleOldestSeconds is the oldest wait among those.
	EligibleOldestSeconds int64 `json:"eligible_oldest_seconds,omitempty"`
}

// QueueSummary is the answer of GET /api/v1/queue: the account's queue
// per selector set, the largest first, at most a bound of sets and then
// the "other" bucket.
type QueueSummary struct {
	Queued        int           `json:"queued"`
	OldestSeconds int64         `json:"oldest_seconds"`
	Sets          []QueueSignal `json:"sets"`
}

// PoolSelectors is the selector set whose queue sizes a StatefulSet of
// delegates named name with tags: what its delegates match (their tags
// and, implicitly, their name and hostnames, the pods' names
// STATEFULSET-0 to STATEFULSET-(maxReplicas-1)), so that a task pinned to
// one replica counts as waiting too.
func PoolSelectors(name, statefulSet string, tags []string, maxReplicas int) []string {
	s := append([]string{name}, tags...)
	for i := range maxReplicas {
		s = append(s, statefulSet+"-"+strconv.Itoa(i))
	}
	return NormalizeSelectors(s)
}
