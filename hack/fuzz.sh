#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME (default 3s) each. New crashers are
# written to the package's testdata/fuzz/ and fail the run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FUZZTIME=${FUZZTIME:-3s}
n=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		printf '[fuzz] %s %s (%s)\n' "$dir" "$target" "$FUZZTIME"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "./$dir" >/dev/null || {
			printf '[fuzz] FAILED: %s %s — rerun: go test -run %s ./%s\n' "$dir" "$target" "$target" "$dir" >&2
			exit 1
		}
		n=$((n + 1))
	done
done < <(git ls-files '*_test.go' | xargs -r grep -l '^func Fuzz' | sort)
printf '[fuzz] %d targets passed\n' "$n"
