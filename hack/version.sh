#!/usr/bin/env bash
# Prints the version stamped into the binary and used as the image tag:
# the nearest v* tag (git describe), or, before the first tag,
# v0.1.0-dev.<commit> so every build is traceable. "-dirty" marks
# uncommitted changes. Outside a git checkout (a source archive, a copy)
# it prints v0.1.0-dev. Never "latest".
set -euo pipefail
cd "$(dirname "$0")/.."
# The checkout must be this directory's own, not one it was copied into.
if [[ $(git rev-parse --show-toplevel 2>/dev/null) != "$PWD" ]]; then
	echo "v0.1.0-dev"
	exit 0
fi
if v=$(git describe --tags --match 'v*' --dirty 2>/dev/null); then
	echo "$v"
	exit 0
fi
v="v0.1.0-dev.$(git rev-parse --short=12 HEAD)"
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	v="$v-dirty"
fi
echo "$v"
