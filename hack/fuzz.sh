#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 1m),
# one after the other. Targets are found, not listed: a new FuzzXxx in any
# *_test.go is run without touching this script. The seed corpora alone run
# in `make test-unit` as ordinary tests.
set -euo pipefail
# The toolchain of the Makefile: the go command fetches it when the
# installed Go is older (Flux 2.10's modules need Go 1.27).
export GOTOOLCHAIN=go1.27.3

fuzztime=${FUZZTIME:-1m}
cd "$(dirname "$0")/.."

found=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz: $pkg $name for $fuzztime"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
	found=$((found + 1))
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' internal api test 2>/dev/null |
	sed 's/:func /:/' | sort)

if [ "$found" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $found target(s) ran for $fuzztime each"
