package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrom(t *testing.T) {
	t.Parallel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
		{Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}}
	tests := []struct {
		name      string
		ldVersion string
		bi        *debug.BuildInfo
		want      Info
	}{
		{"no build information", "", nil, Info{Version: "dev", GoVersion: runtime.Version(), Platform: platform}},
		{"-ldflags wins", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-x"}, Settings: vcs},
			Info{Version: "v1.2.3", Commit: "abc123", Modified: true, CommitTime: "2026-11-23T10:00:00Z", GoVersion: "go1.26.0", Platform: platform}},
		{"module version", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.4.0"}},
			Info{Version: "v0.4.0", GoVersion: "go1.26.0", Platform: platform}},
		{"go run: (devel)", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "dev", Commit: "abc", GoVersion: "go1.26.0", Platform: platform}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, from(tt.ldVersion, tt.bi)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}
