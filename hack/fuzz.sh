#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME (default 3s) each, FUZZ_JOBS (default
# 2) targets at a time with one fuzzing worker each. New crashers are written to the package's
# testdata/fuzz/ and fail the run.
#
# Each package with targets is built once into _out/fuzz/ (FUZZ_BIN), and all its targets run that
# binary, as go test -fuzz would run it; go test would link it again for every target. A binary
# that is up to date is not relinked.
#
# The coverage instrumentation that guides the fuzzer (the compiler's -d=libfuzzer, what go test
# -fuzz gives every package, the standard library's too) is given to netfleet's own packages
# alone: the branches that steer the mutations are those of netfleet's decoders and validators.
# Their dependencies are compiled as netfleet's commands are (hack/lib.sh GO_BUILD_FLAGS, with
# CGO_ENABLED as the commands that link the same packages have it), so the fuzz binaries reuse
# that build instead of an instrumented one of every dependency (minutes of CPU on a fresh
# machine).
#
# `hack/fuzz.sh build` only builds the binaries.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export FUZZTIME=${FUZZTIME:-3s}
FUZZ_BIN=${FUZZ_BIN:-$ROOT/_out/fuzz}
targets=()
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		targets+=("$dir $target")
	done
done < <(git ls-files '*_test.go' | xargs -r grep -l '^func Fuzz' | sort)
[ ${#targets[@]} -gt 0 ] || { echo "[fuzz] no fuzz targets found" >&2; exit 1; }

# binary <dir>: where the package in <dir> is built.
binary() { echo "$FUZZ_BIN/${1//\//_}.test"; }

MODULE=$(go list -m)
# cgo_dirs: the directories of the packages whose test binaries link libenet; these are built with
# cgo, as the game servers are, the others without, as the operator is.
cgo_dirs=" $(link_kinds -test $(printf './%s\n' "${targets[@]%% *}" | sort -u) | awk '$3 == "cgo" { print $2 }' | tr '\n' ' ')"
# The instrumentation does not depend on the target: one build per package, one after another
# (each go test -c builds with every core).
mkdir -p "$FUZZ_BIN"
printf '%s\n' "${targets[@]}" | sort -u -k1,1 | while read -r dir target; do
	cgo=0
	[[ $cgo_dirs != *" $ROOT/$dir "* ]] || cgo=1
	# For the module's packages this -gcflags replaces GO_BUILD_FLAGS' all=-dwarf=false (the last
	# matching pattern wins), so it repeats -dwarf=false.
	CGO_ENABLED=$cgo go test -c "${GO_BUILD_FLAGS[@]}" "-gcflags=$MODULE/...=-dwarf=false -d=libfuzzer" \
		-o "$(binary "$dir")" "./$dir"
done
[ "${1:-}" != build ] || exit 0

# Each line is "dir target"; a failing target prints its output and how to rerun it. The binary
# runs in its package's directory, where it reads and writes testdata/fuzz/, with the fuzzing
# cache go test gives it (its build cache's fuzz/<import path>).
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline exceeded" when
# -fuzztime ends while a worker is busy (go.dev/issue/75804, fixed in Go 1.27): no input failed
# and no crasher is written. Such a run is repeated once; a crasher or any other failure is not.
run_one() {
	local dir=$1 target=$2 out corpus before attempt bin cache
	corpus="$dir/testdata/fuzz/$target"
	bin=$(binary "$dir")
	cache="$FUZZ_CACHE/$MODULE/$dir"
	for attempt in 1 2; do
		printf '[fuzz] %s %s (%s)\n' "$dir" "$target" "$FUZZTIME"
		before=$(ls "$corpus" 2>/dev/null | wc -l)
		if out=$(cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
			-test.parallel 1 -test.fuzzcachedir "$cache" -test.paniconexit0 -test.timeout 10m 2>&1); then
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
# go test's fuzzing cache of a package: its build cache's fuzz/<import path>.
FUZZ_CACHE="$(go env GOCACHE)/fuzz"
export -f run_one binary
export FUZZ_BIN FUZZ_CACHE MODULE
printf '%s\n' "${targets[@]}" | xargs -P "${FUZZ_JOBS:-2}" -L 1 bash -c 'run_one "$@"' _
printf '[fuzz] %d targets passed\n' "${#targets[@]}"
