#!/usr/bin/env bash
# Builds every command under cmd/, and every example game's command under examples/*/cmd/, into
# bin/: the operator with CGO_ENABLED=0, as its image is built (it must never link libenet), the
# rest with cgo (the game servers and the bots link the system libenet).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { printf '[build] %s\n' "$*"; }

mkdir -p bin
log "bin/operator (CGO_ENABLED=0)"
CGO_ENABLED=0 go build -o bin/operator ./cmd/operator
others=()
for d in cmd/*/; do
	d=${d%/}
	[ "$d" = cmd/operator ] && continue
	others+=("./$d")
done
for d in examples/*/cmd/*/; do
	others+=("./${d%/}")
done
log "bin/{$(printf '%s,' "${others[@]##*/}" | sed 's/,$//')}"
go build -o bin/ "${others[@]}"
