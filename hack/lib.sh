# Sourced by the hack/ scripts: it makes the repository root the working directory and puts bin/
# and the control-plane binaries (`make test-assets`) on PATH. KUBE_VERSION is the control-plane
# version, as in the Makefile. BIN (default bin/) is where the set-up scripts install; point it at
# another directory to try them without touching bin/.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=${BIN:-$ROOT/bin}
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$BIN/k8s/$KUBE_VERSION}
export PATH=$BIN:$KUBEBUILDER_ASSETS:$PATH
# Kubernetes' staging modules (k8s.io/api, ...) of the control-plane version.
STAGING_VERSION=v0.${KUBE_VERSION#v1.}

# --- build flags ---------------------------------------------------------------------------------
# How every program in bin/ is built, netfleet's commands (hack/build.sh) and the tools and
# Kubernetes binaries built from Go modules (hack/toolchain.sh) alike, so that the packages they
# share compile once: with -trimpath; with Kubernetes' release build tags (hack/lib/golang.sh in
# Kubernetes: notest drops the fuzzing helpers from k8s.io/apimachinery, grpcnotrace drops
# golang.org/x/net/trace from gRPC; providerless, which once dropped the in-tree cloud providers,
# selects no file in v1.37); and, like Kubernetes' release binaries, without debug information
# (-dwarf=false here, -s -w at the link), which takes a tenth off the compile. `go build ./cmd/...`
# without these flags gives binaries to debug.
GO_BUILD_TAGS=notest,grpcnotrace
GO_BUILD_FLAGS=(-trimpath -tags "$GO_BUILD_TAGS" -gcflags=all=-dwarf=false)
# How make test compiles netfleet's packages and their dependencies for go vet, golangci-lint (its
# export data; see hack/verify.sh) and the race-detector tests alike, so that all three use one
# build of them: with the race detector, without debug information. (Test binaries are linked
# with -w too.) A failing test is rerun with plain `go test -race`.
RACE_FLAGS=(-race -gcflags=all=-dwarf=false)

# link_kinds <go list arguments>...: every main package go list names (with -test, every test
# binary's too), one per line as "<import path> <dir> <kind>": cgo for those that link libenet
# (through gameserver/enet, or its test variant in its own test binary), else static.
link_kinds() {
	go list -f '{{if eq .Name "main"}}{{.ImportPath}} {{.Dir}} {{join .Deps " "}}{{end}}' "$@" |
		awk -v enet=github.com/netfleet/netfleet/gameserver/enet 'NF {
			kind = "static"
			for (i = 3; i <= NF; i++) if ($i == enet) kind = "cgo"
			print $1, $2, kind
		}'
}

# netfleet_commands: every command's package, under cmd/ and examples/*/cmd/, one per line as
# "<import path> <kind>" (see link_kinds).
netfleet_commands() {
	link_kinds ./cmd/... ./examples/... | awk '{ print $1, $3 }'
}

# --- step timing ---------------------------------------------------------------------------------
# Every set-up script runs its steps through `timed`, which prints how long each took. When
# NETFLEET_TIMINGS names a file (the Makefile gives each `make` run one), it also appends a line
#   <start> <end> <status> <group> <step> <cpu>   (separated by tabs)
# (times in seconds since the epoch, status ok, failed or cached, cpu the user and system CPU
# seconds of the step's processes) that hack/timings.sh turns into the run's table. Appending one
# short line is atomic, so steps that run side by side can share the file. TIMING_GROUP names the
# script's group in the table (deps, tools, control-plane, node, ...).

# timed <step> <command>...: runs the command, prints "[group] <step>: done in 1m02s (CPU 1m55s)",
# records it and returns the command's status.
timed() {
	local step=$1 start end rc=0 cpu0 cpu1
	shift
	timing_cpu
	cpu0=$TIMING_CPU
	start=$EPOCHREALTIME
	"$@" || rc=$?
	end=$EPOCHREALTIME
	timing_cpu
	cpu1=$TIMING_CPU
	local cpu
	cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'function sec(t,   n, p, i, s) { n = split(t, p, " "); s = 0
		for (i = 1; i <= n; i++) { sub(/s$/, "", p[i]); split(p[i], q, "m"); s += q[1] * 60 + q[2] } return s }
		BEGIN { printf "%.1f", sec(b) - sec(a) }')
	timing_record "$start" "$end" "$([ "$rc" -eq 0 ] && echo ok || echo failed)" "$step" "$cpu"
	printf '[%s] %s: %s in %s (CPU %s)\n' "${TIMING_GROUP:-step}" "$step" "$([ "$rc" -eq 0 ] && echo done || echo FAILED)" \
		"$(timing_format "$start" "$end")" "$(timing_format 0 "$cpu")"
	return "$rc"
}

# timing_cpu: sets TIMING_CPU to the user and system CPU time of this shell's finished child
# processes and theirs, as bash's times prints it ("1m02.5s 0m3.1s"). times runs in this shell:
# in a subshell its counts would start at zero.
timing_cpu() {
	local f
	f=$(mktemp)
	times >"$f"
	{
		read -r _
		read -r TIMING_CPU
	} <"$f"
	rm -f "$f"
}

# timing_cached <step>: records a step that had nothing to do (its result was already there).
timing_cached() {
	timing_record "$EPOCHREALTIME" "$EPOCHREALTIME" cached "$1" 0
}

# timing_record <start> <end> <status> <step> <cpu>
timing_record() {
	[ -n "${NETFLEET_TIMINGS:-}" ] || return 0
	mkdir -p "$(dirname "$NETFLEET_TIMINGS")"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${TIMING_GROUP:-step}" "${4//$'\t'/ }" "${5:-}" >>"$NETFLEET_TIMINGS"
}

# timing_format <start> <end>: the duration as 7.2s or 3m05s.
timing_format() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = b - a; if (d < 60) printf "%.1fs", d; else printf "%dm%02ds", int(d / 60), int(d) % 60 }'
}
