package bootstrap

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release's version, set by `make release` with
// -ldflags "-X cardshop/bootstrap.version=v1.2.3"; empty in a plain build, which then reports
// the module's version from the build information ("(devel)" for a build from a work tree).
var version string

// BuildInfo is what the binary knows of its build: the version, the source commit and whether
// the work tree had changes (from the build information Go records with -buildvcs), when it
// was committed, and the Go release that compiled it.
type BuildInfo struct {
	Version  string
	Commit   string // "" when the build recorded none (go run, a build outside git)
	Modified bool
	Time     string // the commit's time, RFC 3339
	Go       string
	Platform string // GOOS/GOARCH
}

// ReadBuildInfo returns the binary's BuildInfo.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if ok && b.Version == "" {
		b.Version = info.Main.Version
	}
	if ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

// Revision is the commit as `cardshop version` and cardshop_build_info name it: "unknown" when
// the build recorded none, "+modified" after it for a work tree with changes.
func (b BuildInfo) Revision() string {
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	if b.Modified {
		commit += "+modified"
	}
	return commit
}

// String is the line `cardshop version` prints.
func (b BuildInfo) String() string {
	s := fmt.Sprintf("cardshop %s (commit %s", b.Version, b.Revision())
	if b.Time != "" {
		s += ", " + b.Time
	}
	return s + ", " + b.Go + " " + b.Platform + ")"
}
