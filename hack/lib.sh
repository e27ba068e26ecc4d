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

# --- step timing ---------------------------------------------------------------------------------
# Every set-up script runs its steps through `timed`, which prints how long each took. When
# NETFLEET_TIMINGS names a file (the Makefile gives each `make` run one), it also appends a line
#   <start> <end> <status> <group> <step>   (separated by tabs)
# (times in seconds since the epoch, status ok, failed or cached) that hack/timings.sh turns into
# the run's table. Appending one short line is atomic, so steps that run side by side can share the
# file. TIMING_GROUP names the script's group in the table (deps, tools, control-plane, node, ...).

# timed <step> <command>...: runs the command, prints "[group] <step>: took 1m02s", records it and
# returns the command's status.
timed() {
	local step=$1 start end rc=0
	shift
	start=$EPOCHREALTIME
	"$@" || rc=$?
	end=$EPOCHREALTIME
	timing_record "$start" "$end" "$([ "$rc" -eq 0 ] && echo ok || echo failed)" "$step"
	printf '[%s] %s: %s in %s\n' "${TIMING_GROUP:-step}" "$step" "$([ "$rc" -eq 0 ] && echo done || echo FAILED)" \
		"$(timing_format "$start" "$end")"
	return "$rc"
}

# timing_cached <step>: records a step that had nothing to do (its result was already there).
timing_cached() {
	timing_record "$EPOCHREALTIME" "$EPOCHREALTIME" cached "$1"
}

# timing_record <start> <end> <status> <step>
timing_record() {
	[ -n "${NETFLEET_TIMINGS:-}" ] || return 0
	mkdir -p "$(dirname "$NETFLEET_TIMINGS")"
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${TIMING_GROUP:-step}" "${4//$'\t'/ }" >>"$NETFLEET_TIMINGS"
}

# timing_format <start> <end>: the duration as 7.2s or 3m05s.
timing_format() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = b - a; if (d < 60) printf "%.1fs", d; else printf "%dm%02ds", int(d / 60), int(d) % 60 }'
}
