// Package release holds what upgrades need to agree on: the version rule
// (which delegate versions a manager accepts), the signature of a release
// binary (an ed25519 signature over its SHA-256, version, OS and
// architecture), its keys, and the layout of a manager's release
// directory. It depends on the standard library only.
package release

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Semver is a parsed release version: vMAJOR.MINOR.PATCH with an optional
// pre-release or build suffix (kept, not compared).
type Semver struct {
	Major, Minor, Patch int
	Suffix              string
}

// String is the canonical form, "v1.2.3" (plus its suffix).
func (v Semver) String() string {
	return fmt.Sprintf("v%d.%d.%d%s", v.Major, v.Minor, v.Patch, v.Suffix)
}

// ParseSemver parses "v1.2.3", "1.2.3", "v1.2" and such with a "-rc.1" or
// "+meta" suffix. A version that is not one (such as "(devel)" or "dev")
// is reported with ok false: the version rule accepts such builds always.
func ParseSemver(s string) (Semver, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	core, suffix := s, ""
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		core, suffix = s[:i], s[i:]
	}
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Semver{}, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || len(p) > 9 {
			return Semver{}, false
		}
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Semver{}, false
		}
		n[i] = x
	}
	return Semver{Major: n[0], Minor: n[1], Patch: n[2], Suffix: suffix}, true
}

// Compare orders two versions by major, minor and patch: -1, 0 or 1. A
// pre-release ("-rc.1") comes before the release it precedes.
func (v Semver) Compare(o Semver) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	vp, op := strings.HasPrefix(v.Suffix, "-"), strings.HasPrefix(o.Suffix, "-")
	switch {
	case vp && !op:
		return -1
	case op && !vp:
		return 1
	}
	return 0
}

// pseudoRE matches the suffix of a Go pseudo-version
// (v0.0.0-20261123101500-0f85cf4e8c12, v1.2.4-0.20261123101500-…): a build
// of an untagged commit, not a release.
var pseudoRE = regexp.MustCompile(`[.-]\d{14}-[0-9a-f]{12}(\+|$)`)

// releaseVersion parses s as a release version: semver, and not a Go
// pseudo-version.
func releaseVersion(s string) (Semver, bool) {
	v, ok := ParseSemver(s)
	if !ok || pseudoRE.MatchString(v.Suffix) {
		return Semver{}, false
	}
	return v, true
}

// OldestAccepted is the oldest delegate version a manager of version
// manager accepts: the previous minor version's first release
// (v1.4.x accepts v1.3.0 on; v2.0.x accepts v1.0.0 on: every version of
// the previous major). ok is false when manager is not a release version
// (a development build or a Go pseudo-version), which accepts every
// delegate.
func OldestAccepted(manager string) (Semver, bool) {
	m, ok := releaseVersion(manager)
	if !ok {
		return Semver{}, false
	}
	if m.Minor > 0 {
		return Semver{Major: m.Major, Minor: m.Minor - 1}, true
	}
	if m.Major > 0 {
		return Semver{Major: m.Major - 1}, true
	}
	return Semver{}, true
}

// Accepted reports whether a manager of version manager accepts a
// delegate of version delegate: yes when either is not a release version
// ("(devel)", "dev", empty, a Go pseudo-version), else when delegate is
// not older than OldestAccepted(manager). Newer delegates are accepted.
func Accepted(manager, delegate string) bool {
	oldest, ok := OldestAccepted(manager)
	if !ok {
		return true
	}
	d, ok := releaseVersion(delegate)
	if !ok {
		return true
	}
	// A pre-release of the oldest accepted version is accepted too.
	d.Suffix = ""
	return d.Compare(oldest) >= 0
}

// RefusedFrom says when a delegate of version delegate, accepted by a
// manager of version manager, will be refused: the manager's next minor
// version (vMAJOR.MINOR+1), when that one no longer accepts it. ok is
// false when it will still be accepted then, when it is refused already,
// and when either is not a release version (no rule applies).
func RefusedFrom(manager, delegate string) (string, bool) {
	m, ok := releaseVersion(manager)
	if !ok || !Accepted(manager, delegate) {
		return "", false
	}
	next := fmt.Sprintf("v%d.%d", m.Major, m.Minor+1)
	if Accepted(next+".0", delegate) {
		return "", false
	}
	return next, true
}

// Downgrade reports whether moving a delegate from running to wanted goes
// back: running is a release version and wanted is older, or is not a
// release version at all (a development build or a Go pseudo-version
// cannot be shown to be newer). A development build running has no order
// and moves anywhere. Upgraders move back only to a version an
// administrator pinned (a rollback), so a manager, or whoever answers in
// its name, cannot send delegates to an old release with its known flaws.
func Downgrade(running, wanted string) bool {
	r, ok := releaseVersion(running)
	if !ok {
		return false
	}
	w, ok := releaseVersion(wanted)
	if !ok {
		return true
	}
	return w.Compare(r) < 0
}

// SameVersion reports whether a and b name the same version ("v1.2.3"
// and "1.2.3" do); versions that are not semver compare as text.
func SameVersion(a, b string) bool {
	va, oka := ParseSemver(a)
	vb, okb := ParseSemver(b)
	if oka && okb {
		return va.Compare(vb) == 0 && va.Suffix == vb.Suffix
	}
	return strings.TrimSpace(a) == strings.TrimSpace(b)
}

// ValidVersionName reports whether s may name a version in a path and a
// file name: 1 to 64 characters of letters, digits, '.', '-', '+' and
// '_', not starting with '.'.
func ValidVersionName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '+', c == '_':
		default:
			return false
		}
	}
	return true
}
