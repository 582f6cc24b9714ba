package protocol

// Upgrades (since v4). A delegate registers with its build
// version, and with RegisterRequest.Upgrade and Slot when a watcher runs
// it. The manager wants one version per delegate group: its own unless an
// administrator pinned another or holds the group back (PUT
// PathDelegates/{name}/upgrade). A watcher asks POST PathUpgradeCheck
// which version its delegate should run, reports how its upgrade goes,
// and downloads a release binary and its signature from PathReleases.
// Delegates older than the manager accepts (the previous minor version
// on) are refused at registration with CodeDelegateExpired.
const (
	// PathUpgradeCheck (POST UpgradeCheckRequest → UpgradeCheckResponse)
	// is called by a watcher with the delegate token in its headers
	// (HeaderAccountID and "Authorization: Bearer TOKEN").
	PathUpgradeCheck = "/api/v1/delegate/upgrade"
	// PathReleases + "/{version}/{os}/{arch}" serves a release binary,
	// + "/{version}/{os}/{arch}/signature" its signature file; the
	// delegate token in the headers, as for PathUpgradeCheck. The query
	// parameter QueryReleaseBinary chooses the binary: legate (absent),
	// or legate-delegate, the delegate alone.
	PathReleases = "/api/v1/delegate/releases"
	// QueryReleaseBinary names the release binary of a PathReleases
	// request.
	QueryReleaseBinary = "binary"
)

// Upgrade modes a delegate registers with (RegisterRequest.Upgrade).
const (
	// UpgradeManual: no watcher runs the delegate (empty on the wire).
	UpgradeManual = ""
	// UpgradeAuto: a watcher runs it and upgrades it.
	UpgradeAuto = "auto"
	// UpgradeOff: a watcher runs it with AUTO_UPGRADE=false: it
	// supervises the delegate but does not upgrade it.
	UpgradeOff = "off"
)

// Upgrade states of a delegate instance (Delegate.UpgradeState). A
// failed upgrade is UpgradeFailed + ": " + the reason.
const (
	UpgradeCurrent   = "current"
	UpgradeAvailable = "upgrade available"
	UpgradeUpgrading = "upgrading"
	UpgradeFailed    = "upgrade failed"
	// UpgradeExpired: older than the manager accepts; refused at its
	// next registration.
	UpgradeExpired = "expired"
)

// Watcher states a watcher reports (UpgradeCheckRequest.State).
const (
	WatcherIdle      = ""
	WatcherUpgrading = "upgrading"
	WatcherFailed    = "failed"
)

// UpgradeCheckRequest is what a watcher tells the manager each time it
// asks which version to run.
type UpgradeCheckRequest struct {
	// Name and Hostname identify the delegate the watcher runs.
	Name     string `json:"name"`
	Hostname string `json:"hostname"`
	// Version is the version the watcher's current delegate runs.
	Version string `json:"version"`
	// OS and Arch are the platform of the binary the watcher would
	// download (GOOS, GOARCH).
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// AutoUpgrade is false when AUTO_UPGRADE=false: the watcher only
	// supervises.
	AutoUpgrade bool `json:"auto_upgrade"`
	// State is WatcherIdle, WatcherUpgrading (to Target) or WatcherFailed
	// (the upgrade to Target failed: Reason says why).
	State  string `json:"state,omitempty"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// UpgradeCheckResponse answers an UpgradeCheckRequest.
type UpgradeCheckResponse struct {
	// Wanted is the version the manager wants the group to run ("" when
	// it is held back: keep what runs).
	Wanted string `json:"wanted"`
	// Held is true when an administrator holds the group back, or while
	// its ring waits for an earlier one (Waiting says so).
	Held    bool   `json:"held,omitempty"`
	Waiting string `json:"waiting,omitempty"`
	// Available is true when the manager holds a signed binary of Wanted
	// for the asked platform.
	Available bool `json:"available"`
	// Connected lists the versions of the group's instances on the
	// watcher's host (by Slot, see RegisterRequest.Slot) that are
	// connected now: how a watcher learns that a new version registered.
	Connected []string `json:"connected"`
	// PollIntervalMS is how often the watcher should ask again.
	PollIntervalMS int64 `json:"poll_interval_ms"`
	// Pinned is true when Wanted is the version an administrator pinned
	// the group to (UpgradePin): the only answer that moves a watcher to
	// a version older than the one it runs (a rollback). Without it a
	// watcher refuses to go back.
	Pinned bool `json:"pinned,omitempty"`
}

// UpgradePolicy actions (UpgradePolicyRequest.Action).
const (
	// UpgradePin makes the group want Version instead of the manager's own.
	UpgradePin = "pin"
	// UpgradeHold keeps the group on what it runs.
	UpgradeHold = "hold"
	// UpgradeRelease drops a pin or hold: the group wants the manager's
	// version again.
	UpgradeRelease = "release"
	// UpgradeSetRing puts the group in UpgradePolicyRequest.Ring.
	UpgradeSetRing = "ring"
)

// Rings, in the order a new version reaches them: the manager offers its
// version to a group of ring N only after the groups of the nearest
// earlier ring that has delegates all ran it for the soak time
// (--upgrade-soak) with no failed upgrade. A group is in RingDefault
// unless put in another. Pins and holds override rings. A group is the
// delegates of one name registered with tokens of one scope (account, an
// org or a project): each scope's groups go through the rings on their
// own, so the delegates of one scope never hold back another's.
const (
	RingCanary  = "canary"
	RingEarly   = "early"
	RingDefault = "default"
)

// Rings lists the rings in order.
func Rings() []string { return []string{RingCanary, RingEarly, RingDefault} }

// UpgradePolicyRequest sets a delegate group's upgrade policy (PUT
// PathDelegates/{name}/upgrade).
type UpgradePolicyRequest struct {
	Action  string `json:"action"`
	Version string `json:"version,omitempty"`
	// Ring is the ring of UpgradeSetRing.
	Ring string `json:"ring,omitempty"`
	// Org and Project name the scope of the group: the delegates of that
	// name whose tokens have exactly this scope (empty: the account's).
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
}

// UpgradePolicy is a delegate group's upgrade policy and the version it
// wants as a result.
type UpgradePolicy struct {
	Name string `json:"name"`
	// Org and Project are the group's scope (empty: the account's).
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// Pinned is the pinned version; Held is true when held back.
	Pinned string `json:"pinned,omitempty"`
	Held   bool   `json:"held,omitempty"`
	// Ring is the group's ring (RingDefault unless set).
	Ring string `json:"ring"`
	// Wanted is the version the group wants ("" when held, or while its
	// ring waits: Waiting says for what).
	Wanted  string `json:"wanted"`
	Waiting string `json:"waiting,omitempty"`
	// ManagerVersion is the manager's own version, and OldestAccepted the
	// oldest delegate version it accepts ("" for a development build,
	// which accepts all).
	ManagerVersion string `json:"manager_version"`
	OldestAccepted string `json:"oldest_accepted,omitempty"`
}
