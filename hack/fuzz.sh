#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME (default 3s) each, FUZZ_JOBS (default
# 2) targets at a time with one fuzzing worker each. New crashers are written to the package's
# testdata/fuzz/ and fail the run.
#
# `hack/fuzz.sh build` only compiles them: every package with a target and its dependencies, with
# the fuzzing instrumentation (the standard library's too), one package after another. make test
# runs it at low CPU priority beside the race-detector tests, which leave a core idle part of the
# time, so the fuzz targets then start on a warm build cache.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export FUZZTIME=${FUZZTIME:-3s}
targets=()
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		targets+=("$dir $target")
	done
done < <(git ls-files '*_test.go' | xargs -r grep -l '^func Fuzz' | sort)

if [ "${1:-}" = build ]; then
	# The instrumentation does not depend on the target: one per package compiles it.
	printf '%s\n' "${targets[@]}" | sort -u -k1,1 | while read -r dir target; do
		go test -c -fuzz "^${target}\$" -o /dev/null "./$dir"
	done
	exit 0
fi

# Each line is "dir target"; a failing target prints its output and how to rerun it.
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline exceeded" when
# -fuzztime ends while a worker is busy (go.dev/issue/75804, fixed in Go 1.27): no input failed
# and no crasher is written. Such a run is repeated once; a crasher or any other failure is not.
run_one() {
	local dir=$1 target=$2 out corpus before attempt
	corpus="$dir/testdata/fuzz/$target"
	for attempt in 1 2; do
		printf '[fuzz] %s %s (%s)\n' "$dir" "$target" "$FUZZTIME"
		before=$(ls "$corpus" 2>/dev/null | wc -l)
		if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 1 "./$dir" 2>&1); then
			return 0
		fi
		if [[ $attempt == 1 && $(ls "$corpus" 2>/dev/null | wc -l) == "$before" ]] &&
			grep -q '^    context deadline exceeded$' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
			printf '[fuzz] %s %s: the fuzzing coordinator missed its own deadline (go.dev/issue/75804), no input failed; once more\n' "$dir" "$target"
			continue
		fi
		break
	done
	printf '%s\n[fuzz] FAILED: %s %s — rerun: go test -run %s ./%s\n' "$out" "$dir" "$target" "$target" "$dir" >&2
	return 255 # stops xargs
}
export -f run_one
printf '%s\n' "${targets[@]}" | xargs -P "${FUZZ_JOBS:-2}" -L 1 bash -c 'run_one "$@"' _
printf '[fuzz] %d targets passed\n' "${#targets[@]}"
