#!/usr/bin/env bash
# Builds every command under cmd/, and every example game's command under examples/*/cmd/, into
# bin/: the operator with CGO_ENABLED=0, as its image is built (it must never link libenet), the
# rest with cgo (the game servers and the bots link the system libenet). Built once, without the
# race detector: `make demo` runs them and the tests that run commands take them from here
# (internal/testbin). A binary that is up to date is not linked again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=build
log() { printf '[build] %s\n' "$*"; }

mkdir -p "$BIN"
log "$BIN/operator (CGO_ENABLED=0)"
timed "operator (CGO_ENABLED=0)" env CGO_ENABLED=0 go build -o "$BIN/operator" ./cmd/operator
others=()
for d in cmd/*/; do
	d=${d%/}
	[ "$d" = cmd/operator ] && continue
	others+=("./$d")
done
for d in examples/*/cmd/*/; do
	others+=("./${d%/}")
done
names=$(printf '%s,' "${others[@]##*/}" | sed 's/,$//')
log "$BIN/{$names}"
timed "commands (cgo)" go build -o "$BIN/" "${others[@]}"
