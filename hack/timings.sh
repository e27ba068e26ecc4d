#!/usr/bin/env bash
# Prints the table of one run's steps and their times from the file the set-up scripts append to
# (NETFLEET_TIMINGS, or the file given; see `timed` in hack/lib.sh): when each step started after
# the run's first step, how long it took, the CPU time its processes used, and how it ended; then,
# per group, the wall-clock time in which any of its steps ran and their CPU time. Steps of the real-node tier (group node) are left out of the figure
# "netfleet" so the time the rest of the run took can be read on its own.
set -euo pipefail
file=${1:-${NETFLEET_TIMINGS:-}}
[ -n "$file" ] && [ -s "$file" ] || { echo "[timings] no steps recorded${file:+ in $file}"; exit 0; }

sort -n -k1,1 "$file" | awk -F '\t' -v file="$file" '
function fmt(d) { if (d < 60) return sprintf("%.1fs", d); return sprintf("%dm%02ds", int(d / 60), int(d) % 60) }
# union(key): the length of the union of the intervals recorded under key (sorted by start).
function union(key,   i, n, s, e, total, cs, ce) {
	n = cnt[key]; total = 0; cs = -1
	for (i = 1; i <= n; i++) {
		s = st[key, i]; e = en[key, i]
		if (cs < 0) { cs = s; ce = e; continue }
		if (s > ce) { total += ce - cs; cs = s; ce = e } else if (e > ce) ce = e
	}
	if (cs >= 0) total += ce - cs
	return total
}
function add(key, s, e) { cnt[key]++; st[key, cnt[key]] = s; en[key, cnt[key]] = e }
{
	if (NR == 1) first = $1
	if ($2 > last) last = $2
	rows[NR] = sprintf("  %-14s %-48s %7s %8s %8s  %s", $4, $5, fmt($1 - first), fmt($2 - $1), $6 == "" ? "-" : fmt($6), $3)
	if (!($4 in seen)) { seen[$4] = 1; groups[++ng] = $4 }
	add($4, $1, $2); cpu[$4] += $6; cpu["\001all"] += $6
	if ($4 != "node") { add("\001netfleet", $1, $2); cpu["\001netfleet"] += $6 }
}
END {
	printf "\n[timings] the steps of this run (%s)\n", file
	printf "  %-14s %-48s %7s %8s %8s  %s\n", "group", "step", "start", "took", "CPU", "status"
	for (i = 1; i <= NR; i++) print rows[i]
	printf "\n  %-14s %-10s %s\n", "group", "CPU", "wall clock in which any of its steps ran"
	for (i = 1; i <= ng; i++) printf "  %-14s %-10s %s%s\n", groups[i], fmt(cpu[groups[i]]), fmt(union(groups[i])), groups[i] == "node" ? "   (the real-node tier: its builds and tests)" : ""
	printf "  %-14s %-10s %s\n", "netfleet", fmt(cpu["\001netfleet"]), fmt(union("\001netfleet")) "   (every step but the real-node tier)"
	printf "  %-14s %-10s %s\n", "whole run", fmt(cpu["\001all"]), fmt(last - first)
}'
