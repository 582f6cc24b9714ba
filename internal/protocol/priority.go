package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A task's priority (TaskSpec.Priority) orders the queue: among the
// queued tasks a delegate could take, the one of higher effective priority
// goes first. A task's effective priority grows by one level per
// PriorityAgingStep it waits, so a low task is not starved by a stream of
// higher ones: it goes before every task queued more than
// (its level's distance below the other's) × PriorityAgingStep after it,
// and so at most (PriorityMax - PriorityMin) × PriorityAgingStep worth of
// later submissions can overtake it (StarvationBound).
//
// Effective priority p + waited/step orders two tasks the same way at
// every instant as the fixed key created_at - p × step does (earlier key
// first): p_a + (now - c_a)/s > p_b + (now - c_b)/s exactly when
// c_a - p_a·s < c_b - p_b·s, now cancelling out. The store keeps that key
// (QueueRank) in a column with an index over the queued tasks, so the
// queue is read in priority order with aging by a plain index scan.
const (
	// PriorityMin and PriorityMax bound a priority; 0 on the wire means
	// "not set" (PriorityNormal).
	PriorityMin = 1
	PriorityMax = 10

	PriorityLow    = 2
	PriorityNormal = 5
	PriorityHigh   = 8
	PriorityUrgent = 10

	// PriorityAgingStep is how long a task waits to gain one level.
	PriorityAgingStep = time.Minute

	// StarvationBound is the longest head start a task of any priority
	// has over one of the lowest priority: a task of PriorityMin queued
	// at t goes before every task queued after t + StarvationBound.
	StarvationBound = (PriorityMax - PriorityMin) * PriorityAgingStep
)

// priorityName is a named level, as `--priority` accepts it.
type priorityName struct {
	name  string
	level int
}

// priorityNames are the named levels.
func priorityNames() []priorityName {
	return []priorityName{{"low", PriorityLow}, {"normal", PriorityNormal}, {"high", PriorityHigh}, {"urgent", PriorityUrgent}}
}

// ResolvePriority returns the priority a task runs with: p, or
// PriorityNormal for 0 (not set). A value out of range is an error that
// says what to use.
func ResolvePriority(p int) (int, error) {
	if p == 0 {
		return PriorityNormal, nil
	}
	if p < PriorityMin || p > PriorityMax {
		return 0, fmt.Errorf("priority %d is out of range: use %d (lowest) to %d (highest), or leave it out for normal (%d)", p, PriorityMin, PriorityMax, PriorityNormal)
	}
	return p, nil
}

// ParsePriority reads a priority given as a number (PriorityMin to
// PriorityMax) or as a named level: low, normal, high or urgent.
func ParsePriority(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, n := range priorityNames() {
		if s == n.name {
			return n.level, nil
		}
	}
	p, err := strconv.Atoi(s)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("priority %q: use low (%d), normal (%d), high (%d), urgent (%d), or a number from %d to %d",
			s, PriorityLow, PriorityNormal, PriorityHigh, PriorityUrgent, PriorityMin, PriorityMax)
	}
	return ResolvePriority(p)
}

// PriorityName names a level ("high"), or gives its number.
func PriorityName(p int) string {
	p = PriorityOrNormal(p)
	for _, n := range priorityNames() {
		if p == n.level {
			return n.name
		}
	}
	return strconv.Itoa(p)
}

// PriorityOrNormal is p, or PriorityNormal for 0 (not set: a task from
// before priorities, or a spec before its check).
func PriorityOrNormal(p int) int {
	if p == 0 {
		return PriorityNormal
	}
	return p
}

// QueueRank is the queue's sort key of a task created at createdAt with
// priority p (0 counts as PriorityNormal), in microseconds: the smaller
// goes first. See PriorityAgingStep.
func QueueRank(createdAt time.Time, p int) int64 {
	return createdAt.UnixMicro() - int64(PriorityOrNormal(p))*PriorityAgingStep.Microseconds()
}
