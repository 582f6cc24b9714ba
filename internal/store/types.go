package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	ErrNotFound       = errors.New("not found")
	ErrConflict       = errors.New("already exists")
	ErrAlreadyClaimed = errors.New("task already claimed")
	ErrNoCapacity     = errors.New("delegate at capacity")
	ErrStaleLease     = errors.New("stale lease")
	ErrTaskTerminal   = errors.New("task already finished")
	// ErrIdentityConflict: a registration matches an instance bound to
	// another token that is still valid (see IdentityConflictError).
	ErrIdentityConflict = errors.New("instance identity bound to another token")
	// ErrLogClosed: a log chunk is numbered past the last chunk the
	// task's result named. It also matches ErrTaskTerminal.
	ErrLogClosed = fmt.Errorf("%w: log chunk past the last one its result named", ErrTaskTerminal)
	// ErrTokenUsedUp: a registration of a new process with a token
	// created with a number of uses, every one of them taken.
	ErrTokenUsedUp = errors.New("the delegate token has no use left")
)

// Account is a tenant. Everything else belongs to exactly one account.
type Account struct {
	ID        string
	CreatedAt time.Time
}

// Token is a delegate token; only its SHA-256 hash is stored.
type Token struct {
	ID        string
	AccountID string
	Name      string
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
	// Org and Project give the scope of the delegates that register with
	// the token; empty means account level.
	Org     string
	Project string
	// RequireApproval: delegates that register with the token wait for an
	// administrator's approval (Instance.Approval).
	RequireApproval bool
	// InitSecrets are the stored secrets (names, at the token's scope)
	// its delegates' INIT_SCRIPT may use.
	InitSecrets []string
	// Uses is how many delegate processes may register with the token (0:
	// unlimited); UsesLeft how many more may.
	Uses, UsesLeft int
}

// Remaining is the number of uses left, nil for a token without a limit.
func (t Token) Remaining() *int {
	if t.Uses <= 0 {
		return nil
	}
	n := t.UsesLeft
	return &n
}

// Instance is one delegate process, identified within its account by
// IdentityKey (name + hostname [+ IP]). A re-registration with the same
// identity updates the row and increments Generation.
type Instance struct {
	ID          string
	AccountID   string
	IdentityKey string
	Name        string
	Hostname    string
	IP          string
	Tags        []string
	Version     string
	Type        string
	TokenID     string
	Capacity    int
	Generation  int64
	// Org and Project are the scope, copied from the token at registration.
	Org     string
	Project string
	// Description is the delegate's DELEGATE_DESCRIPTION.
	Description string
	// ContainerRuntime is the container runtime the instance registered
	// with ("podman", "docker"); empty: none.
	ContainerRuntime string
	// ContainerReason is why it has none, as it registered it (bounded:
	// protocol.RegisteredContainerReason).
	ContainerReason string
	// TaskIsolation is what the instance reported about how it keeps its
	// tasks apart (nil: nothing, an older delegate).
	TaskIsolation *protocol.TaskIsolation
	// TaskTypes are the task types the instance registered that it runs;
	// nil: it did not say (an older delegate: protocol.LegacyTaskTypes).
	TaskTypes []string
	// UpgradeMode is how the instance is upgraded, as it registered:
	// protocol.UpgradeAuto, UpgradeOff or "" (no watcher).
	UpgradeMode string
	// Connection is protocol.ConnWebSocket or protocol.ConnPolling ("" before
	// the first event channel opens).
	Connection     string
	Draining       bool
	RegisteredAt   time.Time
	LastHeartbeat  *time.Time
	DeregisteredAt *time.Time
	// ProcessID is the delegate process that registers (RegisterRequest's
	// ProcessID): a re-registration by the same process takes no use of a
	// token with a number of uses. Written by UpsertInstance only.
	ProcessID string
	// Approval is the decision about the instance's delegate
	// (protocol.ApprovalPending, ApprovalApproved, ApprovalRejected), or
	// "" when its token requires none. On UpsertInstance, any non-empty
	// value asks for approval: the stored decision of the delegate (its
	// name within its token) is taken, pending when there is none.
	Approval string
}

// InstanceTouch is one entry of a batched liveness flush.
type InstanceTouch struct {
	ID            string
	LastHeartbeat time.Time
	Connection    string
	Draining      bool
}

// Task is the stored form of a task. Spec is the submitted spec; its
// SecretEnv carries values only into CreateTask and out of ClaimTask (to
// the delegate that runs the task): the store keeps them sealed and drops
// them when the task ends, and every other read leaves Spec.SecretEnv nil
// and lists the names in SecretNames.
type Task struct {
	ID        string
	AccountID string
	Spec      protocol.TaskSpec
	// SecretNames are the names of the task's secret values, sorted
	// (they stay after the values are dropped).
	SecretNames      []string
	Status           string
	ExitCode         *int
	Error            string
	HTTPResult       *protocol.HTTPResult
	TimeoutMS        int64
	QueueTimeoutMS   int64
	Retries          int
	Attempts         int
	Epoch            int64
	InstanceID       string
	DelegateName     string
	DelegateHostname string
	// DeniedInstances are instances that must not run this task again
	// (they were lost while running it).
	DeniedInstances []string
	CreatedAt       time.Time
	AcquiredAt      *time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	QueueDeadline   time.Time
	LeaseExpiresAt  *time.Time
	// LogBytes is how many bytes of output were received; LogOmitted how
	// many of them were dropped by the head/tail cap.
	LogBytes   int64
	LogOmitted int64
	// CreatedBy says who submitted the task: the principal's kind and
	// name ("user alice"), "" for tasks from before it was recorded.
	CreatedBy string
	// StoredSecrets are the values of the stored secrets the spec
	// references (${secrets.NAME}), by name, as the task's scope sees
	// them: set by ClaimTask only, for the claimer, like Spec.SecretEnv.
	StoredSecrets map[string]string
	// SecretBindings are what each stored secret the spec references
	// resolved to when the task was created: what ClaimTask hands out
	// (CreateTask stores them; no read returns them).
	SecretBindings []SecretBinding
}

// QueueRank is the task's place in the queue (protocol.QueueRank): the
// smaller goes first.
func (t Task) QueueRank() int64 { return protocol.QueueRank(t.CreatedAt, t.Spec.Priority) }

// CompareQueued orders queued tasks as the queue takes them (QueuedPage's
// order): by QueueRank, then ID.
func CompareQueued(a, b *Task) int {
	if ra, rb := a.QueueRank(), b.QueueRank(); ra != rb {
		return cmp.Compare(ra, rb)
	}
	return strings.Compare(a.ID, b.ID)
}

// WithoutSecretValues returns t with its secret names in SecretNames and
// no secret values: the form every read but ClaimTask returns, and the one
// to keep in memory.
func (t Task) WithoutSecretValues() Task {
	t.StoredSecrets, t.SecretBindings = nil, nil
	if len(t.Spec.SecretEnv) == 0 {
		return t
	}
	names := slices.Clone(t.SecretNames)
	for k := range t.Spec.SecretEnv {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	t.SecretNames = names
	t.Spec.SecretEnv = nil
	return t
}

// Claim is what ClaimTask needs to know about the claimer.
type Claim struct {
	TaskID           string
	InstanceID       string
	DelegateName     string
	DelegateHostname string
	// Capacity is the claimer's capacity; 0 means unlimited.
	Capacity int
	// LeaseDuration is how long the lease lasts without a heartbeat.
	LeaseDuration time.Duration
	// Check, if set, sees the task as stored, inside the claim's
	// transaction, before anything is decided; an error it returns ends
	// the claim, and ClaimTask returns that task with the error. It lets
	// the caller apply its own rules (selectors, deny lists, a repeated
	// acquire) without reading the task a second time. A queued task is
	// claimed by one statement that returns the row (on PostgreSQL only
	// with Capacity 0), and
	// Check sees the row as it was before it (the fields of a previous
	// holder, which no rule of a queued task reads, left empty); if Check
	// refuses, the claim is undone and made again the long way, so the
	// task ClaimTask returns with Check's error is the one stored.
	Check func(Task) error
}

// Result is a task outcome reported by a delegate (or decided by the manager).
type Result struct {
	Status     string
	ExitCode   *int
	Error      string
	HTTPResult *protocol.HTTPResult
	// LastSeq is the number of the last log chunk of the attempt, as the
	// delegate's result says (0: it sent none). CompleteTask stores it;
	// AppendLogs then refuses chunks numbered past it (ErrLogClosed).
	LastSeq int64
	// Outputs are the task's outputs (protocol.ResultRequest.Outputs).
	// CompleteTask writes them, in the same transaction, to the pipeline
	// run step whose task this is; a task of no run keeps none.
	Outputs map[string]string
	// Holder, when set, is the delegate the result comes from:
	// CompleteTask applies it only if it holds the task (ErrStaleLease
	// otherwise), checked in the statement that ends the task, so that a
	// delegate's report needs no read of who holds the task first.
	Holder Holder
	// Brief says the caller of CompleteTask needs only the ID, account,
	// status, epoch, instance and spec of the task it returns (the rest
	// is left zero): the statement that ends the task returns four
	// columns instead of the whole row.
	Brief bool
}

// Holder is the delegate instance a report comes from, with the scope of
// its registration. A report is applied only to a task the instance holds
// and whose scope its scope covers: an identity that registered again
// with a token of another scope keeps its instance ID, not its tasks.
// The zero Holder checks nothing.
type Holder struct {
	Instance string
	// Org and Project are the registration's scope ("" = account, or org).
	Org, Project string
}

// holds reports whether h holds t (always, for the zero Holder).
func (h Holder) holds(t Task) bool {
	if h.Instance == "" {
		return true
	}
	return t.InstanceID == h.Instance && protocol.Covers(h.Org, h.Project, t.Spec.Org, t.Spec.Project)
}

// holderCond is the condition of an update that applies only to a task
// h holds (see holds; the scope part is protocol.Covers in SQL), with its
// arguments.
func holderCond(h Holder) (string, []any) {
	return ` AND (? = '' OR (instance_id = ? AND (? = '' OR org = ?) AND (? = '' OR project = ?)))`,
		[]any{h.Instance, h.Instance, h.Org, h.Org, h.Project, h.Project}
}

// TaskHolding says who holds a task and in which scope the task is.
type TaskHolding struct {
	// InstanceID holds (or last held) the task; "" for a task never claimed.
	InstanceID string
	// Org and Project are the task's scope ("" = account level).
	Org, Project string
}

// HeldTask is a task running on an instance, as TasksHeldBy returns it.
type HeldTask struct {
	Epoch        int64
	Org, Project string
}

// LeaseExtension extends the lease of a running task held at Epoch.
type LeaseExtension struct {
	TaskID    string
	Epoch     int64
	ExpiresAt time.Time
}

// LeaseCut ends a running task's lease sooner (ShortenLeases): at To, if
// it ends later than To and no later than Known, the latest end the
// caller knows of. A lease extended past Known (by another manager the
// delegate reached since) is left alone.
type LeaseCut struct {
	TaskID string
	Epoch  int64
	To     time.Time
	Known  time.Time
}

// TaskFilter selects tasks for ListTasks. Zero fields do not filter.
type TaskFilter struct {
	AccountID string
	Status    string
	// Scopes, when not nil, keeps only the tasks at or beneath one of
	// them (the scopes a caller may view): a zero ScopeFilter matches
	// every task, one with Org the org's tasks and its projects', one
	// with Org and Project that project's. A non-nil empty list matches
	// no task. The limit applies after it, so a page is full whenever
	// enough matching tasks exist.
	Scopes []ScopeFilter
	// Delegate, when set, keeps the tasks the delegate of that name or
	// hostname (compared without case) ran or runs.
	Delegate string
	// Within, when not nil, keeps the tasks of that org (and its
	// projects) or of that project: a filter the caller asks for, on top
	// of Scopes (what it may view).
	Within *ScopeFilter
	// Before, when not nil, keeps the tasks older than it in the
	// listing's order (created_at, then ID, both descending): the cursor
	// of the next page.
	Before *TaskCursor
	// Limit caps the number of rows (newest first); 0 means 100.
	Limit int
}

// TaskCursor is a position in a task listing: that of the task with this
// creation time and ID.
type TaskCursor struct {
	CreatedAt time.Time
	ID        string
}

// ScopeFilter is an account (zero), an org, or a project of an org.
type ScopeFilter struct {
	Org     string
	Project string
}

// LogCap bounds stored output per task: the first Head bytes and the last
// Tail bytes are kept; what lies between is dropped and counted.
type LogCap struct {
	Head int64
	Tail int64
}

// LogCursor is a position in a task's log: after chunk Seq of Attempt.
type LogCursor struct {
	Attempt int
	Seq     int64
}

// StoredChunk is a log chunk with the attempt it belongs to (attempt N is
// the one that ran at epoch N).
type StoredChunk struct {
	Attempt int
	Chunk   protocol.LogChunk
}

// LeaseOutcome describes what ExpireLeases did with one task.
type LeaseOutcome struct {
	Task Task
	// Requeued is true when the task went back to the queue (retries left);
	// false when it ended failed.
	Requeued bool
	// LostInstanceID is the instance whose lease expired.
	LostInstanceID string
}
