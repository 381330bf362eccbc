package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// BinDirEnv names the environment variable that points at the directory of
// cluster binaries when Options.BinDir is empty. The Makefile exports it.
const BinDirEnv = "HELM_CONTROLLER_TOOLS_BIN"

// cacheEnv mirrors hack/tools/build.sh: it overrides the cache root.
const cacheEnv = "HELM_CONTROLLER_TOOLS_CACHE"

// Names of the binaries (and the CRD directory) hack/tools/build.sh puts in
// its bin directory.
const (
	binEtcd              = "etcd"
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
	binKwok              = "kwok"
	binSourceController  = "source-controller"
	sourceCRDDir         = "source-controller-crds"
)

var requiredBinaries = []string{
	binEtcd, binAPIServer, binControllerManager, binScheduler, binKwok, binSourceController,
}

// binaries holds absolute paths to everything the cluster runs.
type binaries struct {
	dir        string
	sourceCRDs string
}

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// defaultBinDir follows the cache layout of hack/tools/build.sh.
func defaultBinDir() (string, error) {
	if root := os.Getenv(cacheEnv); root != "" {
		return filepath.Join(root, "bin"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the user cache directory: %w", err)
	}
	return filepath.Join(cache, "afterhooks-helm-controller", "tools", "bin"), nil
}

// ToolBinDir returns the directory of the cluster tool binaries:
// explicit when set, else $HELM_CONTROLLER_TOOLS_BIN, else the build cache
// of hack/tools/build.sh. It does not check what the directory holds.
func ToolBinDir(explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		var err error
		if dir, err = defaultBinDir(); err != nil {
			return "", err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving bin directory: %w", err)
	}
	return dir, nil
}

// findBinaries picks the bin directory (see ToolBinDir) and checks that
// everything needed is in it.
func findBinaries(explicit string) (binaries, error) {
	dir, err := ToolBinDir(explicit)
	if err != nil {
		return binaries{}, err
	}
	var missing []string
	for _, name := range requiredBinaries {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	crds := filepath.Join(dir, sourceCRDDir)
	if info, err := os.Stat(crds); err != nil || !info.IsDir() {
		missing = append(missing, sourceCRDDir+"/")
	}
	if len(missing) > 0 {
		return binaries{}, fmt.Errorf("cluster binaries missing from %s: %v; run `make tools` (or hack/tools/build.sh) to build them", dir, missing)
	}
	return binaries{dir: dir, sourceCRDs: crds}, nil
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	if err != nil {
		return false
	}
	return info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}
