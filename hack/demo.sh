#!/usr/bin/env bash
# make demo: netfleet end to end on this machine. It builds the commands, starts the local control
# plane (netfleet-dev: etcd, kube-apiserver, the operator, and a pod runner that starts each
# game-server Pod as a process on its own loopback address), applies the sample Fleet of three
# servers and an allocation, runs bots against the servers — a third of them through linkem with
# loss and delay — and halfway through changes the fleet's netcode with `kubectl patch`, showing
# every server pick it up with no restart. It ends with the per-peer view, the config generations,
# a PNG of every client's send rate and snapshot age, and a FleetAutoscaler refilling the fleet's
# buffer of free servers after two more allocations, and checks that nothing it started is left
# running. Everything it writes is under _out/demo/.
#
# Needs `make deps tools test-assets` (make demo runs them). DEMO_DURATION (seconds of bot
# traffic, default 30) and DEMO_BOTS (clients, default 24, a third of them through linkem) tune it.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
OUT=$ROOT/_out/demo
DURATION=${DEMO_DURATION:-30}
BOTS=${DEMO_BOTS:-24}
FLEET=arena
REPLICAS=3
LOSSY=$((BOTS / 3))
DIRECT=$((BOTS - LOSSY))
# linkem's impairment: 5% loss and 40 ms towards the client, 40 ms back, a little jitter.
LINK_PROFILE='{"down":{"loss":0.05,"delayMs":40,"jitterMs":5},"up":{"delayMs":40}}'
LINK_PORT_BASE=17770
# The live change: raise the congestion floor, so clients on a lossy link are backed off to 30
# snapshots per second instead of 15.
PATCH='{"spec":{"template":{"spec":{"netcode":{"congestion":{"minSendHz":30}}}}}}'
PATCH_TEXT="congestion.minSendHz 15 -> 30"
# Where netfleet-dev's operator serves its metrics (its default --operator-cmd).
OPERATOR_METRICS=127.0.0.1:18080

began=$SECONDS
step() { printf '\n[%3ds] ==> %s\n' $((SECONDS - began)) "$*"; }
info() { printf '        %s\n' "$*"; }
indent() { sed 's/^/        /'; }
die() {
	printf '\n[%3ds] demo failed: %s\n' $((SECONDS - began)) "$*" >&2
	exit 1
}

[ "$DURATION" -ge 10 ] || die "DEMO_DURATION must be at least 10 seconds"
[ "$LOSSY" -ge "$REPLICAS" ] || die "DEMO_BOTS must be at least $((3 * REPLICAS))"

# --- processes: every one the demo starts is recorded, stopped on exit and checked gone --------
# Each command the demo starts runs in a session of its own (setsid), and nothing below it starts
# another, so a session's members are exactly what that command left running; a process id that
# an unrelated process reuses is never taken for one of ours.
DEV_PID="" BOTS_PID="" LINK_PIDS=() WATCH_PIDS=() SESSIONS=()
declare -A SEEN=()
stopped=""

# started pid: records the session of a command just started with setsid (which makes the new
# session just after the fork, so it is waited for).
started() {
	local sid i
	for ((i = 0; i < 50; i++)); do
		sid=$(ps -o sid= -p "$1" | tr -d ' ' || true)
		if [ -z "$sid" ] || [ "$sid" = "$1" ]; then break; fi
		sleep 0.1
	done
	SESSIONS+=("$1")
	[ -n "$sid" ] || die "process $1 exited as soon as it started"
	[ "$sid" = "$1" ] || die "process $1 did not start a session of its own"
}

# members prints pid and command line of every process left in the demo's sessions.
members() {
	[ "${#SESSIONS[@]}" -gt 0 ] || return 0
	ps -o pid=,args= -s "$(IFS=,; echo "${SESSIONS[*]}")" || true
}

# track notes the processes netfleet-dev has started so far (for the count at the end).
track() {
	local pid
	[ -n "$DEV_PID" ] || return 0
	for pid in $(ps -o pid= -s "$DEV_PID" || true); do
		[ "$pid" = "$DEV_PID" ] || SEEN[$pid]=1
	done
}

# stop_pid pid seconds: SIGTERM, wait up to seconds, then SIGKILL.
stop_pid() {
	local pid=$1 limit=$2 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "        process $pid did not stop in ${limit}s; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# stop_group pid: SIGTERM to the process group of a command started with setsid (a pipeline),
# then waits for its leader.
stop_group() {
	kill -TERM -- "-$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# shutdown stops everything in reverse order of start and fails if any process is left.
shutdown() {
	[ -z "$stopped" ] || return 0
	stopped=1
	local pid leftover
	[ -z "$BOTS_PID" ] || stop_pid "$BOTS_PID" 10
	for pid in "${LINK_PIDS[@]}"; do stop_pid "$pid" 5; done
	for pid in "${WATCH_PIDS[@]}"; do stop_group "$pid"; done
	if [ -n "$DEV_PID" ]; then
		track
		# netfleet-dev stops the operator, then the Pods, then kube-apiserver and etcd.
		stop_pid "$DEV_PID" 60
	fi
	leftover=$(members)
	[ -n "$leftover" ] || return 0
	echo "        left behind (killed now):" >&2
	cut -c1-120 <<<"$leftover" | indent >&2
	awk '{ print $1 }' <<<"$leftover" | xargs -r kill -KILL 2>/dev/null || true
	return 1
}

on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -z "$stopped" ] && [ "${#SESSIONS[@]}" -gt 0 ]; then
		printf '\n[%3ds] ==> stopping everything the demo started\n' $((SECONDS - began))
		shutdown || rc=1
	fi
	if [ "$rc" -ne 0 ] && [ -n "$DEV_PID" ]; then
		printf '        logs: %s (netfleet-dev.log, state/operator.log, state/pods/)\n' "$OUT" >&2
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- pre-flight: the fixed ports below are free --------------------------------------------------
# The operator's endpoints and linkem's listeners are fixed, so a second control plane on this
# machine (`make dev`, another `make demo`) would make them fail half-way; say so up front.
ports=(18080 18081 18090)
for ((n = 1; n <= REPLICAS; n++)); do ports+=($((LINK_PORT_BASE + n))); done
filter=$(printf 'sport = :%s or ' "${ports[@]}")
busy=$(ss -Hlntu "( ${filter% or } )" 2>/dev/null || true)
if [ -n "$busy" ]; then
	indent <<<"$busy" >&2
	die "ports ${ports[*]} must be free on 127.0.0.1 (is \`make dev\` or another \`make demo\` running?)"
fi

# --- build ---------------------------------------------------------------------------------------
step "building the commands into bin/"
hack/build.sh | indent
go build "${GO_BUILD_FLAGS[@]}" -o bin/demo-report ./hack/demo-report
info "bin/demo-report"

# --- control plane --------------------------------------------------------------------------------
rm -rf "$OUT"
mkdir -p "$OUT"
step "starting the local control plane: bin/netfleet-dev (etcd, kube-apiserver $KUBE_VERSION, operator, pod runner)"
# A session of its own: a Ctrl-C reaches the demo, which stops netfleet-dev with one SIGTERM (a
# second signal would make it exit without stopping the API server and etcd).
setsid bin/netfleet-dev --dir "$OUT/state" --ready-file "$OUT/ready" >"$OUT/netfleet-dev.log" 2>&1 &
DEV_PID=$!
started "$DEV_PID"
for ((i = 0; i < 1800; i++)); do
	[ -f "$OUT/ready" ] && break
	kill -0 "$DEV_PID" 2>/dev/null || {
		tail -n 20 "$OUT/netfleet-dev.log" | indent >&2
		die "netfleet-dev exited before it was ready"
	}
	sleep 0.1
done
[ -f "$OUT/ready" ] || die "netfleet-dev not ready after 180 s; see $OUT/netfleet-dev.log"
# shellcheck disable=SC1091
source "$OUT/ready"
export KUBECONFIG
track
sed -n 's/^netfleet-dev: \(API server .*\)/\1/p' "$OUT/netfleet-dev.log" | indent
info "operator pid $NETFLEET_DEV_OPERATOR_PID, log $NETFLEET_DEV_OPERATOR_LOG"
info "export KUBECONFIG=$KUBECONFIG"

# --- the fleet --------------------------------------------------------------------------------------
step "kubectl apply -f config/samples/netfleet_v1alpha1_fleet.yaml   (Fleet $FLEET, $REPLICAS servers)"
kubectl apply -f config/samples/netfleet_v1alpha1_fleet.yaml | indent
kubectl wait "flt/$FLEET" --for=jsonpath='{.status.readyReplicas}'=$REPLICAS --timeout=120s >/dev/null ||
	die "the fleet's servers did not become Ready"
kubectl wait "flt/$FLEET" --for=condition=ConfigApplied --timeout=60s >/dev/null ||
	die "the fleet's servers did not apply their config"
track
step "$REPLICAS servers Ready, each running the config the operator pushed"
kubectl get gs -o wide | indent
kubectl get flt | indent

step "kubectl apply -f config/samples/netfleet_v1alpha1_gameserverallocation.yaml"
kubectl apply -f config/samples/netfleet_v1alpha1_gameserverallocation.yaml | indent
kubectl wait gsa/match-1 --for=jsonpath='{.status.state}'=Allocated --timeout=30s >/dev/null ||
	die "allocation match-1 was not Allocated"
kubectl get gsa match-1 | indent
peer_gs=$(kubectl get gsa match-1 -o jsonpath='{.status.gameServerName}')

# servers prints one line per server of the fleet: its config generation (applied by the process /
# desired), the process's instance id, and its Pod's uid and restart count.
servers() {
	local pods name state applied gen instance uid restarts
	pods=$(kubectl get pods -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}')
	printf '%-12s %-9s %-7s %-34s %-36s %s\n' GAMESERVER STATE CONFIG INSTANCE POD-UID RESTARTS
	kubectl get gs -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.name} {.status.state} {.status.netcode.appliedGeneration} {.metadata.generation} {.status.netcode.instanceID}{"\n"}{end}' |
		while read -r name state applied gen instance; do
			read -r uid restarts < <(awk -v n="$name" '$1 == n { print $2, $3 }' <<<"$pods")
			printf '%-12s %-9s %-7s %-34s %-36s %s\n' "$name" "$state" "$applied/$gen" "$instance" "${uid:-?}" "${restarts:-?}"
		done
}

step "servers before the change"
before=$(servers)
indent <<<"$before"
# The change must reach every server as one new generation of its spec.
gens=$(kubectl get gs -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.generation}{"\n"}{end}' | sort -u)
[ "$(wc -l <<<"$gens")" -eq 1 ] || die "the servers' generations differ: $gens"
target_gen=$((gens + 1))

# propagation prints the sum and count of the operator's netfleet_operator_config_propagation_seconds.
propagation() {
	curl -sS --max-time 5 http://$OPERATOR_METRICS/metrics 2>/dev/null |
		awk '$1 == "netfleet_operator_config_propagation_seconds_sum" { s = $2 } $1 == "netfleet_operator_config_propagation_seconds_count" { c = $2 } END { print s + 0, c + 0 }'
}

# propagation_since "sum count" prints the mean propagation of the pushes since that reading.
propagation_since() {
	local now
	now=$(propagation)
	awk -v a="$1" -v b="$now" 'BEGIN { split(a, x, " "); split(b, y, " "); n = y[2] - x[2]; if (n > 0) printf "%.0f ms on average over %d pushes", 1000 * (y[1] - x[1]) / n, n; else print "nothing" }'
}

# --- traffic ---------------------------------------------------------------------------------------
# Each server's game address (for the bots) and admin address (Pod IP and admin port: metrics).
names=() addrs=() admins=() classes=() legend=()
pod_ips=$(kubectl get pods -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}')
while read -r name addr admin_port; do
	names+=("$name")
	addrs+=("$addr")
	admins+=("$(awk -v n="$name" '$1 == n { print $2 }' <<<"$pod_ips"):$admin_port")
done < <(kubectl get gs -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.name} {.status.address}:{.status.port} {.spec.adminPort}{"\n"}{end}')
[ "${#names[@]}" -eq "$REPLICAS" ] || die "expected $REPLICAS servers, found ${#names[@]}"

step "linkem: one impairment proxy per server, $LINK_PROFILE"
for i in "${!names[@]}"; do
	n=$((i + 1))
	listen=127.0.0.1:$((LINK_PORT_BASE + n))
	setsid bin/linkem --listen "$listen" --upstream "${addrs[$i]}" --profile "$LINK_PROFILE" \
		--seed "$n" --stats-interval 0 >"$OUT/linkem-$n.log" 2>&1 &
	LINK_PIDS+=($!)
	started "$!"
	# The bots spread evenly, the first servers taking the remainder.
	direct=$((DIRECT / REPLICAS + (i < DIRECT % REPLICAS ? 1 : 0)))
	lossy=$((LOSSY / REPLICAS + (i < LOSSY % REPLICAS ? 1 : 0)))
	classes+=("direct-$n=$direct@${addrs[$i]}" "lossy-$n=$lossy@$listen")
	legend+=("$n = ${names[$i]}: $direct direct-$n -> ${addrs[$i]}, $lossy lossy-$n -> linkem $listen -> ${addrs[$i]}")
done
printf '%s\n' "${legend[@]}" | indent

step "botswarm: $BOTS clients for ${DURATION}s ($DIRECT direct, $LOSSY through linkem), the fleet patched at t=$((DURATION / 2))s"
class_list=$(IFS=,; echo "${classes[*]}")
setsid bin/botswarm --classes "$class_list" --duration "${DURATION}s" --ramp 1s --commands-hz 5 \
	--json "$OUT/swarm.json" >"$OUT/botswarm.txt" 2>"$OUT/botswarm-progress.log" &
BOTS_PID=$!
started "$BOTS_PID"
swarm_began=$SECONDS

# progress condenses botswarm's last progress line: per class, snapshots/s and age p95.
progress() {
	tail -n 1 "$OUT/botswarm-progress.log" 2>/dev/null |
		sed -E -e 's/ \(min [0-9]+\) [0-9.]+ kB\/s age p95 / /g' -e 's/  +/  /g' -e 's/ Hz / Hz\//g'
}

patched="" peers_taken="" peers_at="" change_ms=""
# The per-peer view is taken once the change has settled, well before the bots leave: each kubectl
# takes a second or more on a busy machine.
peers_from=$((DURATION * 3 / 4))
next_print=5
while kill -0 "$BOTS_PID" 2>/dev/null; do
	sleep 0.5
	t=$((SECONDS - swarm_began))
	if [ "$t" -ge "$next_print" ]; then
		line=$(progress)
		# A line with clients done is the run's last, partial second: its rates are not comparable.
		[ -z "$line" ] || [[ $line == *done=* ]] || info "$line"
		next_print=$((t / 5 * 5 + 5))
	fi
	if [ -z "$patched" ] && [ "$t" -ge $((DURATION / 2)) ]; then
		patched=1
		step "live netcode change: kubectl patch flt $FLEET --type merge -p '$PATCH'"
		before_prop=$(propagation)
		change_ms=$(date +%s%3N)
		kubectl patch flt "$FLEET" --type merge -p "$PATCH" | indent
		# Done when every server's process reports running the new generation of its spec.
		kubectl wait gs -l "netfleet.io/fleet=$FLEET" --for=jsonpath='{.status.netcode.appliedGeneration}'=$target_gen \
			--timeout=30s >/dev/null || die "the servers did not all apply generation $target_gen in 30 s"
		took=$(($(date +%s%3N) - change_ms))
		info "$REPLICAS/$REPLICAS servers run generation $target_gen, seen by kubectl ${took} ms after the patch"
		info "operator's measure, from its seeing each server's new generation to the process running it: $(propagation_since "$before_prop")"
		kubectl get gs | indent
		t=$((SECONDS - swarm_began))
		next_print=$((t / 5 * 5 + 5))
	fi
	if [ -z "$peers_taken" ] && [ "$t" -ge "$peers_from" ]; then
		# The per-peer view while the bots are connected, shown at the end; --direct because the
		# Pod IP is a loopback address the API server's pod proxy refuses.
		peers_cmd="kubectl netfleet peers $peer_gs --direct"
		kubectl netfleet peers "$peer_gs" --direct >"$OUT/peers.txt" 2>&1 || true
		peers_at=$((SECONDS - swarm_began))
		# Taken when it shows the peers; tried again while the bots run.
		if grep -q '^peer=' "$OUT/peers.txt" || ! kill -0 "$BOTS_PID" 2>/dev/null; then
			peers_taken=1
		fi
	fi
done
wait "$BOTS_PID" || die "botswarm failed; see $OUT/botswarm-progress.log"
BOTS_PID=""
[ -n "$patched" ] || die "the run ended before the patch"

step "botswarm's summary per class (full report: $OUT/swarm.json)"
# Every class names its own target, so the header's default server address is left out.
sed -n '1,/^$/p' "$OUT/botswarm.txt" | sed -E -e '/^$/d' | indent

step "servers after the change: same Pods, same processes, no restarts"
after=$(servers)
indent <<<"$after"
# Everything but the state and the config generation must be unchanged.
ident() { awk 'NR > 1 { print $1, $4, $5, $6 }' <<<"$1"; }
[ "$(ident "$before")" = "$(ident "$after")" ] || die "a server's Pod or process changed across the netcode change"
info "pod uids, instance ids and restart counts identical before and after"

# overloads prints, per server, how often its tick loop entered overload mode (ticks running late
# because the machine was busy: every session is then served less until the ticks are calm).
overloads() {
	local i spans
	for i in "${!names[@]}"; do
		spans=$(curl -sS --max-time 5 "http://${admins[$i]}/metrics" | awk '$1 == "netfleet_gameserver_overload_spans_total" { print $2 }')
		printf '%s: %s\n' "${names[$i]}" "${spans:-?}"
	done
}
info "times each server's tick loop ran late and entered overload mode (a busy machine lowers everyone's rate):"
overloads | indent | indent

if [ -n "$peers_at" ]; then
	step "per-peer view of $peer_gs at t=${peers_at}s of the bots' ${DURATION}s: $peers_cmd"
	indent <"$OUT/peers.txt"
fi

step "config generations: kubectl get gs; kubectl get flt"
kubectl get gs -o wide | indent
kubectl get flt | indent

step "report"
bin/demo-report --swarm "$OUT/swarm.json" --change-at "$change_ms" --change "$PATCH_TEXT" --out "$OUT/demo.png" | indent
info "plot of every client's send rate and snapshot age: $OUT/demo.png"

# --- autoscaling ---------------------------------------------------------------------------------
# The sample FleetAutoscaler keeps 2 servers of the fleet free (3 to 10 in all); with match-1
# running, the fleet's 3 servers are what it wants. Two more matches eat the buffer, and the
# autoscaler raises the fleet's replicas as the allocations happen, not at a 30 s poll.
step "kubectl apply -f config/samples/netfleet_v1alpha1_fleetautoscaler.yaml   (keep 2 servers of $FLEET free, 3 to 10 in all)"
kubectl apply -f config/samples/netfleet_v1alpha1_fleetautoscaler.yaml | indent
kubectl wait "fas/$FLEET" --for=condition=AbleToScale --timeout=30s >/dev/null ||
	die "the autoscaler cannot scale the fleet: $(kubectl get fas "$FLEET" -o jsonpath='{.status.conditions}')"
kubectl get fas | indent

# stamped_watch file args...: runs `kubectl get -w args...` in a session of its own, each line it
# prints written to file after the time it was read, in Unix microseconds.
stamped_watch() {
	local out=$1
	shift
	setsid bash -c 'kubectl get -w "$@" | while IFS= read -r line; do printf "%s %s\n" "${EPOCHREALTIME/[.,]/}" "$line"; done' \
		stamped-watch "$@" >"$out" 2>&1 &
	WATCH_PIDS+=($!)
	started "$!"
}

step "two more matches (match-2, match-3) take the free servers; the autoscaler refills the buffer"
# Two watches, as `kubectl get -w` shows them, time the reaction: the servers' states, and the
# fleet's spec.replicas.
free_before=$(kubectl get gs -l "netfleet.io/fleet=$FLEET" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
stamped_watch "$OUT/autoscale-servers.log" gs -l "netfleet.io/fleet=$FLEET" -o jsonpath='{.metadata.name} {.status.state}{"\n"}'
stamped_watch "$OUT/autoscale-replicas.log" "flt/$FLEET" -o jsonpath='{.spec.replicas}{"\n"}'
for ((i = 0; i < 50; i++)); do
	[ -s "$OUT/autoscale-servers.log" ] && [ -s "$OUT/autoscale-replicas.log" ] && break
	sleep 0.1
done
for m in match-2 match-3; do
	printf 'apiVersion: netfleet.io/v1alpha1\nkind: GameServerAllocation\nmetadata: {name: %s}\nspec: {fleet: %s}\n' "$m" "$FLEET"
	echo ---
done | kubectl create -f - | indent
kubectl wait gsa/match-2 gsa/match-3 --for=jsonpath='{.status.state}'=Allocated --timeout=30s >/dev/null ||
	die "match-2 and match-3 were not both Allocated"
kubectl wait "flt/$FLEET" --for=jsonpath='{.spec.replicas}'=5 --timeout=30s >/dev/null ||
	die "the autoscaler did not raise the fleet to 5 replicas"
kubectl wait "flt/$FLEET" --for=jsonpath='{.status.readyReplicas}'=2 --timeout=60s >/dev/null ||
	die "the fleet's new servers did not become Ready"
for pid in "${WATCH_PIDS[@]}"; do stop_group "$pid"; done
WATCH_PIDS=()
# From the watches: when each of the two matches' servers showed Allocated, when spec.replicas
# reached 4 and 5 after them, and when the second new server showed Ready.
matches=$(kubectl get gsa match-2 match-3 -o jsonpath='{range .items[*]}{.status.gameServerName}{"\n"}{end}')
awk -v matches="$matches" -v old="$free_before" '
	BEGIN { split(matches, m, "\n"); for (i in m) if (m[i] != "") want[m[i]] = 1; split(old, o, "\n"); for (i in o) if (o[i] != "") before[o[i]] = 1 }
	FILENAME ~ /servers/ && $3 == "Allocated" && want[$2] && !(($2) in at) { at[$2] = $1; alloc[++n] = $1 }
	FILENAME ~ /servers/ && $3 == "Ready" && !before[$2] && !(($2) in ready) { ready[$2] = $1; fresh[++f] = $1 }
	FILENAME ~ /replicas/ { for (r = 4; r <= $2 && r <= 5; r++) if (!(r in raised)) raised[r] = $1 }
	END {
		if (n < 2 || !(4 in raised) || !(5 in raised) || f < 2) { print "the watches missed part of it"; exit 1 }
		# Sorted, the first Allocated needs 4 replicas, the second 5.
		if (alloc[2] < alloc[1]) { t = alloc[1]; alloc[1] = alloc[2]; alloc[2] = t }
		if (fresh[2] < fresh[1]) { t = fresh[1]; fresh[1] = fresh[2]; fresh[2] = t }
		printf "allocation 1 -> spec.replicas 4: %.0f ms; allocation 2 -> spec.replicas 5: %.0f ms (from each server showing Allocated to the raise, both seen by watches)\n", (raised[4] - alloc[1]) / 1000, (raised[5] - alloc[2]) / 1000
		printf "allocation 2 -> both new servers Ready: %.0f ms\n", (fresh[2] - alloc[2]) / 1000
	}' "$OUT/autoscale-servers.log" "$OUT/autoscale-replicas.log" | indent || die "could not time the autoscaler from the watches"
kubectl get fas,flt | indent
kubectl events --for "fleetautoscaler/$FLEET" | indent

# --- connect tokens --------------------------------------------------------------------------------
step "connect tokens: the fleet requires them from now on (a live change, no restart)"
TOKENS_PATCH='{"spec":{"template":{"spec":{"netcode":{"connectTokens":{"mode":"Required"}}}}}}'
info "kubectl patch flt $FLEET --type merge -p '$TOKENS_PATCH'"
kubectl patch flt "$FLEET" --type merge -p "$TOKENS_PATCH" | indent
# Done when the fleet's status is of the new generation and every server's process runs its
# netcode, which needs the fleet's keys first.
fleet_gen=$(kubectl get flt "$FLEET" -o jsonpath='{.metadata.generation}')
kubectl wait "flt/$FLEET" --for=jsonpath='{.status.observedGeneration}'="$fleet_gen" --timeout=30s >/dev/null ||
	die "the fleet's status did not reach generation $fleet_gen"
kubectl wait "flt/$FLEET" --for=jsonpath='{.status.configAppliedReplicas}'="$(kubectl get flt "$FLEET" -o jsonpath='{.spec.replicas}')" \
	--timeout=60s >/dev/null || die "the servers did not all apply the connect-token mode"
kubectl get gs -o custom-columns='NAME:.metadata.name,STATE:.status.state,CONFIG:.status.netcode.progress,KEYS:.status.netcode.connectKeyIds' | indent

step "a match for 4 players: the allocation answers a connect token for each"
printf 'apiVersion: netfleet.io/v1alpha1\nkind: GameServerAllocation\nmetadata: {name: match-4}\nspec: {fleet: %s, players: [ann, ben, cat, dan]}\n' "$FLEET" |
	kubectl create -f - | indent
kubectl wait gsa/match-4 --for=jsonpath='{.status.state}'=Allocated --timeout=30s >/dev/null ||
	die "match-4 was not Allocated"
match_addr=$(kubectl get gsa match-4 -o jsonpath='{.status.address}:{.status.port}')
kubectl get gsa match-4 -o jsonpath='{range .status.connectTokens[*]}{.token}{"\n"}{end}' >"$OUT/tokens.txt"
[ "$(wc -l <"$OUT/tokens.txt")" -eq 4 ] || die "match-4 did not answer 4 tokens"
kubectl get gsa match-4 -o jsonpath='{range .status.connectTokens[*]}{.player}{"  "}{.token}{"\n"}{end}' |
	awk '{ n = length($2) * 3 / 4 - gsub(/=/, "=", $2); printf "%s  %.24s... (%d bytes)\n", $1, $2, n }' | indent
info "tokens expire at $(kubectl get gsa match-4 -o jsonpath='{.status.connectTokensExpire}')"

step "botswarm: the 4 players join $match_addr with their tokens; a 5th client, without one, is refused"
bin/botswarm --classes "players=4@$match_addr,stranger=1@$match_addr" --tokens "$OUT/tokens.txt" \
	--duration 5s --commands-hz 5 --json "$OUT/tokens-swarm.json" >"$OUT/tokens-swarm.txt" 2>"$OUT/tokens-swarm-progress.log" ||
	die "botswarm failed; see $OUT/tokens-swarm-progress.log"
sed -n '1,/^$/p' "$OUT/tokens-swarm.txt" | sed -E -e '/^$/d' | indent
python3 - "$OUT/tokens-swarm.json" <<'PY' | indent || die "the players were not all served, or the stranger was not refused with 4005"
import json, sys
r = json.load(open(sys.argv[1]))
cls = {c["name"]: c for c in r["classes"]}
players, stranger = cls["players"], cls["stranger"]
hz = [s["hzMedian"] for s in players["series"] if s["clients"] == 4]
ok = players["states"].get("done", 0) == 4 and not players.get("closeCodes") and hz and min(hz) >= 55
ok = ok and stranger.get("closeCodes") == {"4005": 1}
print(f"players: {players['states']}, {min(hz) if hz else 0:.0f}-{max(hz) if hz else 0:.0f} Hz per second; "
      f"stranger: closed with {stranger.get('closeCodes')} (4005: this server requires a connect token)")
sys.exit(0 if ok else 1)
PY

step "stopping: botswarm, linkem, then netfleet-dev (operator, pods, kube-apiserver, etcd)"
shutdown || die "processes were left running"
info "no process left: none of the ${#SEEN[@]} processes netfleet-dev started, no linkem, no botswarm"
step "done in $((SECONDS - began))s"
