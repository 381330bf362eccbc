#!/usr/bin/env bash
# Builds the binaries of the local test cluster into a cache outside the
# checkout, keyed by each tool module's go.sum, so a warm machine rebuilds nothing.
#
# Usage: hack/tools/build.sh [tool...]   (default: all but flux-operator)
#        hack/tools/build.sh --print-bin-dir
# Prints the bin directory on stdout when done.
set -euo pipefail
# The toolchain of the Makefile: the go command fetches it when the
# installed Go is older (Flux 2.10's modules need Go 1.27).
export GOTOOLCHAIN=go1.27.3

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${HELM_CONTROLLER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/afterhooks-helm-controller/tools}
bin_dir="$cache_root/bin"
if [[ ${1:-} == --print-bin-dir ]]; then
	echo "$bin_dir"
	exit 0
fi
mkdir -p "$bin_dir"

k8s_version=v1.36.3
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z"

# module_dir <tool dir> <module> prints where the module cache holds the
# version of module that the tool module pins. It downloads it first: go list
# -m leaves .Dir empty for a module not in the cache yet, as on a new
# machine before anything was built from it.
module_dir() {
	local dir
	dir=$(cd "$here/$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
	if [[ -z "$dir" ]]; then
		echo "[tools] no module directory for $2 (pinned by hack/tools/$1)" >&2
		return 1
	fi
	echo "$dir"
}

# module_key <module dir> names a tool module's pinned versions: what is
# built or copied from it is cached under this key.
module_key() {
	cat "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -c1-16
}

# announce_first_build says, once and before anything is compiled, what a
# cold cache costs, so that a first `make demo` or `make test` does not look
# stuck while it compiles for many minutes.
announced=
announce_first_build() {
	[[ -z $announced ]] || return 0
	announced=1
	cat >&2 <<EOF
[tools] Compiling the local cluster's tools (etcd, kube-apiserver, kube-controller-manager,
[tools] kube-scheduler, kwok, source-controller, upstream helm-controller, the helm CLI) from
[tools] pinned Go modules into $cache_root.
[tools] This happens once per machine: about 12 minutes on 2 cores for the cluster tools, and
[tools] more for the helm CLI (less with more cores); later runs reuse the cache. One line per
[tools] tool follows.
EOF
}

# build_tool <module dir> <binary name> <package> [ldflags]
build_tool() {
	local dir=$1 name=$2 pkg=$3 ldflags=${4:--s -w}
	local key
	key=$(module_key "$dir")
	local target="$cache_root/$name-$key"
	if [[ ! -x "$target" ]]; then
		announce_first_build
		echo "[tools] building $name from hack/tools/$dir (cache key $key), started $(date +%H:%M:%S)" >&2
		local start=$SECONDS
		(cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$target.tmp" "$pkg")
		mv "$target.tmp" "$target"
		echo "[tools] built $name in $((SECONDS - start))s" >&2
	fi
	ln -sf "$target" "$bin_dir/$name"
}

# install_module_dir <module dir> <link name> <module> <subdir> copies a
# directory of a pinned module (CRDs, manifests) into the cache, keyed like
# the module's binary, and links it as bin/<link name>, so tests read it
# without a Go toolchain lookup at runtime.
install_module_dir() {
	local dir=$1 name=$2 module=$3 subdir=$4 key
	key=$(module_key "$dir")
	local target="$cache_root/$name-$key"
	if [[ ! -d "$target" ]]; then
		local mod_dir
		mod_dir=$(module_dir "$dir" "$module")
		rm -rf "$target.tmp"
		cp -r "$mod_dir/$subdir" "$target.tmp"
		chmod -R u+w "$target.tmp"
		mv "$target.tmp" "$target"
	fi
	ln -sfn "$target" "$bin_dir/$name"
}

# install_flux_manifests copies the manifests/ of the pinned Flux module (what
# `flux install` and `flux bootstrap` render) into the cache for the tests of
# config/flux. Nothing is compiled.
flux_version=v2.9.5
install_flux_manifests() {
	local target="$cache_root/flux2-manifests-$flux_version"
	if [[ ! -d "$target" ]]; then
		local mod_dir
		mod_dir=$(cd "$here" && GOFLAGS=-mod=mod go mod download -json "github.com/fluxcd/flux2/v2@$flux_version" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[[ -d "$mod_dir/manifests" ]] || { echo "flux2 $flux_version not downloaded" >&2; exit 1; }
		rm -rf "$target.tmp"
		cp -r "$mod_dir/manifests" "$target.tmp"
		chmod -R u+w "$target.tmp"
		mv "$target.tmp" "$target"
	fi
	ln -sfn "$target" "$bin_dir/flux2-manifests"
}

# install_charts copies the chart directory of each module that
# hack/tools/charts pins (listed in its corpus.txt) into the cache, as
# <bin>/charts/<name>. Only module zips are fetched, verified against the
# module's go.sum; nothing is compiled.
install_charts() {
	local key
	key=$(cat "$here/charts/go.mod" "$here/charts/go.sum" "$here/charts/corpus.txt" | sha256sum | cut -c1-16)
	local target="$cache_root/charts-$key"
	if [[ ! -d "$target" ]]; then
		echo "[tools] fetching the real charts of hack/tools/charts (cache key $key)" >&2
		rm -rf "$target.tmp"
		mkdir -p "$target.tmp"
		local name project module subdir mod_dir
		while read -r name project module subdir; do
			[[ -z $name || $name == \#* ]] && continue
			mod_dir=$(cd "$here/charts" && go mod download -json "$module" |
				sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
			[[ -f "$mod_dir/$subdir/Chart.yaml" ]] || { echo "chart $name: no $module/$subdir/Chart.yaml" >&2; exit 1; }
			cp -r "$mod_dir/$subdir" "$target.tmp/$name"
		done <"$here/charts/corpus.txt"
		chmod -R u+w "$target.tmp"
		mv "$target.tmp" "$target"
	fi
	ln -sfn "$target" "$bin_dir/charts"
}

# build_flux_operator builds the Flux Operator, for the FluxInstance test
# only, and copies the Flux distribution manifests its module carries
# (config/data: flux/<version>/, flux-images/) beside it; the operator reads
# them from its --storage-path, offline. Two things differ from build_tool,
# both as the operator's own Dockerfile builds it:
#   - GOFIPS140=latest: the operator exits at start-up when FIPS 140-3 mode
#     is off ("Operating in non-FIPS mode is not supported").
#   - the module has no web/dist (its web UI is built with npm, outside Go),
#     which the operator embeds. The go command refuses overlays of files in
#     the module cache, so the verified module is copied, given one
#     placeholder page, and built through a -modfile that replaces the
#     module with that copy; every other module stays as go.sum pins it.
#     The test runs the operator with --web-server-port=0.
# One dependency differs from the operator's go.mod: it requires
# go-containerregistry/pkg/authn/kubernetes v0.0.0-20260604213829-6849394e8a65,
# which the module proxy of the build machines does not serve (403 "This
# module version is not available"), so hack/tools/flux-operator/go.mod
# replaces it with the version source-controller v1.9.5 uses, which compiles
# against the operator's calls unchanged. (No comment in that go.mod: its
# bytes are the cache key.)
build_flux_operator() {
	local module=github.com/controlplaneio-fluxcd/flux-operator key mod_dir version
	key=$(module_key flux-operator)
	local target="$cache_root/flux-operator-$key"
	if [[ ! -x "$target" ]]; then
		echo "[tools] building flux-operator from hack/tools/flux-operator (cache key $key), started $(date +%H:%M:%S);" \
			"about 5 CPU-minutes when the other tools are built" >&2
		local start=$SECONDS work="$cache_root/flux-operator-src-$key"
		mod_dir=$(module_dir flux-operator "$module")
		version=$(cd "$here/flux-operator" && go list -m -f '{{.Version}}' "$module")
		rm -rf "$work" && mkdir -p "$work"
		cp -r "$mod_dir" "$work/module" && chmod -R u+w "$work/module"
		mkdir -p "$work/module/web/dist"
		echo '<!doctype html><title>web UI not built</title>' >"$work/module/web/dist/index.html"
		cp "$here/flux-operator/go.mod" "$work/go.mod" && cp "$here/flux-operator/go.sum" "$work/go.sum"
		(cd "$here/flux-operator" && go mod edit -modfile="$work/go.mod" -replace "$module=$work/module" &&
			CGO_ENABLED=0 GOFIPS140=latest go build -modfile="$work/go.mod" -trimpath \
				-ldflags "-s -w -X main.VERSION=$version" -o "$target.tmp" "$module/cmd/operator")
		mv "$target.tmp" "$target"
		rm -rf "$work"
		echo "[tools] built flux-operator in $((SECONDS - start))s" >&2
	fi
	ln -sf "$target" "$bin_dir/flux-operator"
	install_module_dir flux-operator flux-operator-data "$module" config/data
	install_module_dir flux-operator flux-operator-crds "$module" config/crd/bases
}

# helm_version is the Helm SDK the controller is built with; the helm CLI
# of the tests must be the same, or a test of "what `helm package` keeps"
# would test another Helm.
helm_version() {
	sed -n 's/^\(require\)\{0,1\}[[:space:]]*helm\.sh\/helm\/v4 \(v[^ ]*\).*$/\2/p' "$1" | head -1
}
check_helm_pin() {
	local ours pinned
	ours=$(helm_version "$here/../../go.mod")
	pinned=$(helm_version "$here/helm/go.mod")
	if [[ -z $ours || $ours != "$pinned" ]]; then
		echo "hack/tools/helm pins helm.sh/helm/v4 $pinned, go.mod has $ours: update hack/tools/helm/go.mod" >&2
		exit 1
	fi
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok source-controller helm-controller-upstream flux2-manifests charts helm)
for tool in "${want[@]}"; do
	case $tool in
	etcd) build_tool etcd etcd go.etcd.io/etcd/server/v3 ;;
	kube-apiserver | kube-controller-manager | kube-scheduler)
		build_tool kubernetes "$tool" "k8s.io/kubernetes/cmd/$tool" "$k8s_ldflags" ;;
	kwok) build_tool kwok kwok sigs.k8s.io/kwok/cmd/kwok ;;
	source-controller)
		build_tool source-controller source-controller github.com/fluxcd/source-controller
		install_module_dir source-controller source-controller-crds github.com/fluxcd/source-controller config/crd/bases ;;
	helm-controller-upstream)
		# Upstream Flux helm-controller, for takeover and going-back tests only.
		build_tool helm-controller helm-controller-upstream github.com/fluxcd/helm-controller
		install_module_dir helm-controller helm-controller-upstream-config github.com/fluxcd/helm-controller config ;;
	flux2-manifests) install_flux_manifests ;;
	charts) install_charts ;;
	helm)
		# The helm CLI, for tests that package and push charts as authors do.
		check_helm_pin
		build_tool helm helm helm.sh/helm/v4/cmd/helm \
			"-s -w -X helm.sh/helm/v4/internal/version.version=$(helm_version "$here/helm/go.mod")" ;;
	flux-operator)
		# Not in the default list: opt-in (build.sh flux-operator, or
		# make tools-flux-operator), for TestFluxOperatorInstance only.
		build_flux_operator ;;
	*) echo "unknown tool $tool" >&2; exit 2 ;;
	esac
done
echo "$bin_dir"
