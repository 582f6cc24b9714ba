// Package buildinfo says which build of legate runs: the version given at
// build time, the commit, the Go toolchain and the platform, as `legate
// version` prints them. It is its own package so that legate-delegate,
// the delegate alone, reports its build without linking in the CLI.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strconv"
)

// Info says which build of legate runs.
type Info struct {
	// Version is the version given at build time (-ldflags "-X
	// main.version=v1.2.3"), else the main module's version as the go
	// command stamped it (a tag, or a pseudo-version such as
	// v0.0.0-20261123101500-0f85cf4e8c12+dirty), else "dev".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from; empty when the
	// build had no VCS information (go run, -buildvcs=false).
	Commit string `json:"commit,omitempty"`
	// Modified reports uncommitted changes in the build's working tree.
	Modified bool `json:"modified,omitempty"`
	// CommitTime is the time of the commit (RFC 3339), when known.
	CommitTime string `json:"commit_time,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Read returns the build information of the running binary;
// ldVersion is the version set with -ldflags (empty when not set).
func Read(ldVersion string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return from(ldVersion, bi)
}

func from(ldVersion string, bi *debug.BuildInfo) Info {
	info := Info{Version: ldVersion, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified, _ = strconv.ParseBool(s.Value)
		case "vcs.time":
			info.CommitTime = s.Value
		}
	}
	return info
}

// String renders the build information as `legate version` prints it:
// "legate VERSION" and one line each for the commit and Go.
func (b Info) String() string {
	s := "legate " + b.Version + "\n"
	commit := b.Commit
	switch {
	case commit == "":
		commit = "unknown (built without version control information)"
	case b.Modified:
		commit += " (with uncommitted changes)"
	}
	s += "commit: " + commit + "\n"
	if b.CommitTime != "" {
		s += "commit time: " + b.CommitTime + "\n"
	}
	return s + "go: " + b.GoVersion + " " + b.Platform + "\n"
}
