#!/usr/bin/env bash
# make release-check: every local step of docs/release.md, publishing
# nothing. Usage: hack/release-check.sh <version> <dist dir>
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?version}
dist=${2:?dist dir}
step() { printf '\n==> %s\n' "$*"; }

step "release-check for $version"
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
	echo "warning: the checkout has uncommitted changes; a release is built from a clean tag"
fi

step "generated files are up to date"
make --no-print-directory verify-generated

step "go vet"
go vet ./...

step "CHANGELOG.md has a section for $version"
if [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-rc\.[0-9]+)?$ ]]; then
	line=$(grep -m1 -E "^## \[?${version//./\\.}\]?( |$)" CHANGELOG.md) \
		|| { echo "CHANGELOG.md has no '## $version' section"; exit 1; }
	if [[ $line == *unreleased* ]]; then
		echo "CHANGELOG.md still marks $version unreleased: give it the release date"
		exit 1
	fi
	echo "$line"
else
	echo "skipped: $version is not a release version (vX.Y.Z); a tagged checkout needs one"
fi

step "release assets (image for every platform, manifests, SBOMs, provenance, checksums)"
rm -rf "$dist"
go run ./hack/release assets -out "$dist" -version "$version"

step "checksums.txt verifies"
(cd "$dist" && sha256sum -c checksums.txt)

step "push, sign and verify, rehearsed in an in-process registry"
go run ./hack/release rehearse -out "$dist" -version "$version"

step "release-check passed for $version; assets in $dist"
