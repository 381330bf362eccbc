package main

import (
	"runtime/debug"
)

// devVersion is the version of a build that carries neither a stamped
// version nor a module version nor VCS data, e.g. `go build` in a source
// tree that is no git checkout.
const devVersion = "v0.1.0-dev"

// readBuildInfo is debug.ReadBuildInfo, replaceable in tests.
var readBuildInfo = debug.ReadBuildInfo

// buildVersion is the version the controller reports: the stamped one
// (make, the release image), else the module version `go install …@v0.2.0`
// records, else the commit Go's VCS stamping recorded, else devVersion.
func buildVersion(stamped string, info func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	bi, ok := info()
	if !ok {
		return devVersion
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return devVersion
	}
	v := devVersion + "." + revision[:min(12, len(revision))]
	if modified {
		v += "-dirty"
	}
	return v
}
