#!/usr/bin/env bash
# The programs netfleet builds from Go modules and runs — kube-apiserver, kubectl, etcd, the
# kubelet and its peers, controller-gen, golangci-lint, helm, gotestsum and benchstat — are
# resolved as one module graph with netfleet's own requirements, in hack/toolchain.mod (the
# go.mod of this repository, plus those tools, pinned). They are built from it with
# `go build -modfile=hack/toolchain.mod`, with the flags netfleet's commands are built with
# (hack/lib.sh GO_BUILD_FLAGS), so every package they have in common compiles once on a machine:
# the Kubernetes libraries that kube-apiserver, kubectl, the kubelet, helm, controller-gen, the
# operator and netfleet-dev all link are one build, not five. (No release binary can be downloaded
# in every environment netfleet is built in.)
#
#   hack/toolchain.sh build <name>...  builds the named programs that are not installed yet, in
#                                      one go build; see PROGRAMS for the names and where each goes
#   hack/toolchain.sh sync             rewrites hack/toolchain.mod from go.mod and the pins below,
#                                      and raises go.mod's versions where the tools need newer
#                                      ones; run it after changing go.mod or a pin
#   hack/toolchain.sh check            fails when hack/toolchain.mod is stale, or when it and
#                                      go.mod pick different versions of a module that netfleet's
#                                      commands link (then nothing would be shared); make verify
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=${TIMING_GROUP:-toolchain}

log() { printf '[toolchain] %s\n' "$*"; }
die() { printf '[toolchain] ERROR: %s\n' "$*" >&2; exit 1; }

MODFILE=hack/toolchain.mod

# The pinned modules and the programs each provides. Kubernetes' staging modules (k8s.io/api, ...)
# are replaced by the published ones of its minor version, as its own go.mod points them at
# ./staging; etcd is the version Kubernetes pins.
PINS=(
	"k8s.io/kubernetes $KUBE_VERSION"
	"go.etcd.io/etcd/server/v3 v3.7.0"
	"sigs.k8s.io/controller-tools v0.23.0"
	"helm.sh/helm/v3 v3.22.0"
	"github.com/golangci/golangci-lint/v2 v2.15.0"
	"gotest.tools/gotestsum v1.13.0"
	"golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da"
)

# name  package  destination (relative to BIN; {v} is the version of the package's module)
PROGRAMS=(
	"kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver k8s/$KUBE_VERSION/kube-apiserver"
	"kubectl k8s.io/kubernetes/cmd/kubectl k8s/$KUBE_VERSION/kubectl"
	"etcd go.etcd.io/etcd/server/v3 k8s/$KUBE_VERSION/etcd"
	"kubelet k8s.io/kubernetes/cmd/kubelet node/kubernetes-$KUBE_VERSION/kubelet"
	"kube-proxy k8s.io/kubernetes/cmd/kube-proxy node/kubernetes-$KUBE_VERSION/kube-proxy"
	"kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler node/kubernetes-$KUBE_VERSION/kube-scheduler"
	"kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager node/kubernetes-$KUBE_VERSION/kube-controller-manager"
	"controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen-{v}"
	"golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint golangci-lint-{v}"
	"helm helm.sh/helm/v3/cmd/helm helm-{v}"
	"gotestsum gotest.tools/gotestsum gotestsum-{v}"
	"benchstat golang.org/x/perf/cmd/benchstat benchstat-{v}"
)

# The version strings the programs' own release builds stamp in with -X (built inside netfleet's
# module graph, they cannot take them from the main module's version). golangci-lint's are in its
# package main; no other program of the toolchain has a main.version or main.date.
ldflags() {
	local lint date
	lint=$(module_version github.com/golangci/golangci-lint/v2)
	date=$(go list -modfile="$MODFILE" -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' github.com/golangci/golangci-lint/v2)
	printf '%s ' "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" \
		"-X helm.sh/helm/v3/internal/version.version=$(module_version helm.sh/helm/v3)" \
		"-X sigs.k8s.io/controller-tools/pkg/version.version=$(module_version sigs.k8s.io/controller-tools)" \
		"-X main.version=${lint#v}" "-X main.date=$date"
}

module_version() {
	go list -modfile="$MODFILE" -m -f '{{.Version}}' "$1"
}

# disagreements: "path@version" (the toolchain's version) for every module that netfleet's
# commands link at another version under go.mod than under hack/toolchain.mod.
disagreements() {
	local cmds
	mapfile -t cmds < <(netfleet_commands | cut -d' ' -f1)
	join <(go list -tags "$GO_BUILD_TAGS" -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "${cmds[@]}" | sort -u) \
		<(go list -modfile="$MODFILE" -tags "$GO_BUILD_TAGS" -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "${cmds[@]}" | sort -u) |
		awk '$2 != $3 { print $1 "@" $3 }'
}

# write_modfile <file>: the toolchain's modfile for the current go.mod, tidied (its .sum beside it).
write_modfile() {
	local out=$1 kmod staging row
	kmod=$(cd "$ROOT" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	[ -f "$kmod" ] || die "could not download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"
	staging=$(grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/src/' "$kmod" | awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}')
	[ "$(printf '%s\n' "$staging" | grep -c .)" -gt 20 ] || die "expected the staging replace list in $kmod"
	{
		echo "// Generated by hack/toolchain.sh sync from go.mod and the pins in hack/toolchain.sh: the tools"
		echo "// netfleet builds, resolved together with its own requirements. Do not edit."
		echo
		sed -n '/^module /p; /^go /p' go.mod
		echo
		echo "tool ("
		for row in "${PROGRAMS[@]}"; do
			read -r _ pkg _ <<<"$row"
			printf '\t%s\n' "$pkg"
		done | sort -u
		echo ")"
		echo
		sed -n '/^require/,$p' go.mod
		echo
		echo "require ("
		for row in "${PINS[@]}"; do printf '\t%s\n' "$row"; done
		echo ")"
		echo
		echo "replace ("
		echo "$staging"
		echo ")"
	} >"$out"
	cp go.sum "${out%.mod}.sum"
	go mod tidy -modfile="$out" || die "go mod tidy -modfile=$out failed"
}

sync() {
	local i bumps
	for i in 1 2 3 4 5; do
		write_modfile "$MODFILE"
		bumps=$(disagreements)
		if [ -z "$bumps" ]; then
			log "$MODFILE is in step with go.mod"
			return 0
		fi
		log "raising go.mod to the toolchain's versions: $(echo $bumps)"
		# shellcheck disable=SC2086
		go get $bumps && go mod tidy
	done
	die "go.mod and $MODFILE still disagree after 5 rounds: $(echo $bumps)"
}

check() {
	local tmp bumps
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	write_modfile "$tmp/toolchain.mod"
	if ! diff -u "$MODFILE" "$tmp/toolchain.mod"; then
		log "$MODFILE is not what go.mod and the pins give: run 'hack/toolchain.sh sync' and commit"
		return 1
	fi
	bumps=$(disagreements)
	if [ -n "$bumps" ]; then
		log "go.mod and $MODFILE pick different versions of modules netfleet's commands link: $(echo $bumps); run 'hack/toolchain.sh sync' and commit"
		return 1
	fi
}

build() {
	[ $# -gt 0 ] || die "build: name at least one program"
	local want=" $* " row name pkg dest v names=() pkgs=() dests=() stamps=()
	for row in "${PROGRAMS[@]}"; do
		read -r name pkg dest <<<"$row"
		[[ $want == *" $name "* ]] || continue
		want=${want/ $name / }
		v=$(go list -modfile="$MODFILE" -f '{{.Module.Version}}' "$pkg") || die "cannot resolve $pkg in $MODFILE"
		dest=$BIN/${dest//\{v\}/$v}
		# A program is up to date when it is there and was built from the version now pinned.
		if [ -x "$dest" ] && [ "$(cat "$dest.version" 2>/dev/null)" = "$pkg@$v" ]; then
			log "$name $v present; skipping"
			timing_cached "$name"
		else
			names+=("$name")
			pkgs+=("$pkg")
			dests+=("$dest")
			stamps+=("$pkg@$v")
		fi
		# The tools are called by their plain names: bin/<tool> links to bin/<tool>-<version>.
		[[ $dest != "$BIN/$name-$v" ]] || ln -sfn "$name-$v" "$BIN/$name"
	done
	[ -z "${want// /}" ] || die "unknown program(s):$want"
	[ ${#names[@]} -gt 0 ] || return 0
	local work
	work=$(mktemp -d "$BIN/.toolchain.XXXXXX")
	trap 'rm -rf "$work"' RETURN
	log "building ${names[*]} (one go build, with netfleet's commands' flags)"
	local step
	step=$(IFS=,; echo "${names[*]}")
	timed "$step" env CGO_ENABLED=0 go build -modfile="$MODFILE" "${GO_BUILD_FLAGS[@]}" \
		-ldflags "-s -w $(ldflags)" -o "$work/" "${pkgs[@]}" || die "go build failed for ${names[*]}"
	local i built
	for i in "${!names[@]}"; do
		built=$work/$(basename "${pkgs[$i]}")
		# A module's root package at a major version (go.etcd.io/etcd/server/v3) is named after
		# the element before the version.
		[[ ${pkgs[$i]} =~ /v[0-9]+$ ]] && built=$work/$(basename "$(dirname "${pkgs[$i]}")")
		mkdir -p "$(dirname "${dests[$i]}")"
		mv "$built" "${dests[$i]}"
		echo "${stamps[$i]}" >"${dests[$i]}.version"
		log "${names[$i]} -> ${dests[$i]}"
	done
}

case ${1:-} in
build)
	shift
	build "$@"
	;;
sync) sync ;;
check) check ;;
*) die "usage: hack/toolchain.sh build <name>... | sync | check" ;;
esac
