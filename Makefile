# netfleet — build, test and demo entry points. `make test` and `make demo` install everything
# they need on a fresh Debian machine (as root) and cache it under bin/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

ROOT := $(CURDIR)
# Where the set-up installs and builds (point it elsewhere to try the set-up without touching bin/).
BIN ?= $(ROOT)/bin
export BIN
KUBE_VERSION := v1.37.2
export KUBEBUILDER_ASSETS := $(BIN)/k8s/$(KUBE_VERSION)
export PATH := $(BIN):$(KUBEBUILDER_ASSETS):$(PATH)

# Every step of the set-up records how long it took in one file per run of make (the sub-makes
# inherit it); `make test` and `make demo` end with its table (hack/timings.sh).
ifndef NETFLEET_TIMINGS
export NETFLEET_TIMINGS := $(ROOT)/_out/timings/$(shell date +%Y%m%d-%H%M%S)-$(firstword $(MAKECMDGOALS) build).tsv
endif
TIMINGS := hack/timings.sh
# `$(TIMED) <group> <step> <command>` runs a recipe's command as one step of the table.
TIMED := hack/timed

CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
GOTESTSUM := $(BIN)/gotestsum
HELM := $(BIN)/helm

# Tests: a generous per-package timeout; each test bounds itself.
TEST_TIMEOUT ?= 20m
TEST_FLAGS ?= -count=1
FUZZTIME ?= 3s
GOTESTSUM_FORMAT ?= pkgname-and-test-fails

.PHONY: all
all: build

##@ Set-up

# The set-up is a graph of small jobs that make runs SETUP_JOBS at a time. The programs built from
# Go modules — the control plane, the Go tools, the real node's Kubernetes parts — come from one
# module graph shared with netfleet's own commands (hack/toolchain.sh, hack/toolchain.mod), so a
# package they have in common compiles once; the jobs that share packages run one after another
# (the tools, then the control plane, then helm, the static commands and the kubelet), the rest
# beside them. In make test the real node's parts (node/...) are built once netfleet's own tests
# are done, for the real-node tier alone: on a 2-core machine netfleet's jobs keep both cores busy
# until then, and node builds beside them, even at the lowest CPU priority, took a fifth of the
# cores (in the gaps of the tests' waits and links) and lengthened the run by as much. Each step's
# time goes into the run's table.
SETUP_JOBS ?= 6
TOOLCHAIN := hack/toolchain.sh
# `$(call AFTER,<job>)`: an order-only prerequisite on <job> when it is a goal of this run of make
# too, so that a job that shares packages with it starts once they are compiled (run alone, a job
# needs no other).
AFTER = $(filter $(1),$(MAKECMDGOALS))

.PHONY: deps
deps: ## Install the Debian packages netfleet needs (only the missing ones).
	hack/install-deps.sh

.PHONY: tools
tools: | $(call AFTER,deps) ## Build controller-gen, golangci-lint and gotestsum (what verify and the tests run) into bin/.
	TIMING_GROUP=tools $(TOOLCHAIN) build controller-gen golangci-lint gotestsum

.PHONY: tool/helm tool/benchstat
tool/helm: | $(call AFTER,test-assets) ## Build helm into bin/ (after the control plane, whose Kubernetes packages it shares).
	TIMING_GROUP=tools $(TOOLCHAIN) build helm
tool/benchstat:
	TIMING_GROUP=tools $(TOOLCHAIN) build benchstat

.PHONY: test-assets
test-assets: | $(call AFTER,tools) ## Build kube-apiserver, kubectl and etcd into bin/k8s/<version> (skipped when present).
	TIMING_GROUP=control-plane $(TOOLCHAIN) build kube-apiserver kubectl etcd

# The kubelet and its peers after the control plane, whose packages they share; all of them after
# netfleet's tests when make runs those too (see above). pause is compiled statically, with the
# libc6-dev that node/packages installs.
NODE_PARTS := node/kubernetes node/containerd node/cni node/pause
.PHONY: node-assets
node-assets: $(NODE_PARTS) ## Install runc and iptables; build kubelet, kube-proxy, the scheduler, the controller manager, containerd, the CNI plugins and pause into bin/node/ (skipped when present).

.PHONY: node/packages $(NODE_PARTS)
node/packages:
	hack/install-node.sh packages
node/kubernetes: | $(call AFTER,test-assets test/congestion test/fuzz)
	TIMING_GROUP=node $(TOOLCHAIN) build kubelet kube-proxy kube-scheduler kube-controller-manager
node/containerd node/cni node/pause: node/packages | $(call AFTER,test/congestion test/fuzz)
	hack/install-node.sh $(@F)

.PHONY: setup
setup: deps ## deps, then every tool, the control plane and the node parts, SETUP_JOBS at a time.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) tools test-assets tool/helm tool/benchstat $(NODE_PARTS)

# What each entry point needs.
DEMO_SETUP := test-assets build/static build/cgo
TEST_SETUP := tools test-assets tool/helm verify/check verify/lint build/static build/cgo $(NODE_PARTS)

.PHONY: demo-setup
demo-setup: deps ## What make demo and make dev run: the Debian packages, the control plane and the commands.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(DEMO_SETUP)

.PHONY: test-setup
test-setup: deps ## Everything make test runs before its tests: the tools, the control plane, the node parts, verify and the commands.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(TEST_SETUP)

##@ Code generation

.PHONY: generate
generate: dashboards tools ## Generate deepcopy code, the netcode validator's ranges and the Grafana dashboards.
	$(TIMED) verify "generate deepcopy" $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(TIMED) verify "generate netcode bounds" hack/go-race run ./hack/netcode-bounds -dir api/netcode

.PHONY: dashboards
dashboards: ## Generate the Grafana dashboards into charts/netfleet/dashboards (hack/dashboards).
	$(TIMED) verify "generate dashboards" hack/go-race run ./hack/dashboards -out charts/netfleet/dashboards

# After generate: both run controller-gen over ./api/..., whose output the other reads.
.PHONY: manifests
manifests: tools | generate ## Generate CRDs and RBAC into config/ and the chart.
	$(TIMED) verify "generate manifests" $(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=netfleet-operator paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

.PHONY: verify verify/check verify/lint
verify: verify/check verify/lint ## Regenerate and fail on any diff; check hack/toolchain.mod; gofmt, go vet, golangci-lint.
verify/check: generate manifests tools
	hack/verify.sh check
# In make test, beside the race-detector tests, below their CPU priority (see test).
verify/lint: tools | verify/check
	$(if $(filter test/race,$(MAKECMDGOALS)),nice -n 10) hack/verify.sh lint

##@ Build

# When make runs verify too, after its code generation, which rewrites Go files that build reads;
# the static commands after the control plane, whose Kubernetes packages they share.
GENERATED_FIRST = $(if $(filter verify verify/check,$(MAKECMDGOALS)),generate manifests)
.PHONY: build build/static build/cgo
build: build/static build/cgo ## Build every command into bin/: those that link libenet with cgo, the rest (the operator among them) with CGO_ENABLED=0.
build/static: | $(GENERATED_FIRST) $(call AFTER,test-assets)
	hack/build.sh static
build/cgo: | $(GENERATED_FIRST)
	hack/build.sh cgo

.PHONY: c-client
c-client: ## Build the C client library (clients/c): build/libnetfleet.so, libnetfleet.a and netfleet.pc with gcc -std=c99 -Wall -Wextra -Werror.
	$(MAKE) -C clients/c lib

.PHONY: images
images: build ## Build the operator and game-server images from bin/ as OCI archives in _out/images/ (no Docker engine needed).
	go run ./hack/images -bin $(BIN) -out $(ROOT)/_out/images

##@ Run

.PHONY: demo
demo: demo-setup ## Run netfleet end to end on this machine: a Fleet, bots through linkem, a live netcode change; report in _out/demo/.
	$(TIMED) demo "hack/demo.sh" hack/demo.sh || rc=$$?; $(TIMINGS); exit $${rc:-0}

.PHONY: dev
dev: demo-setup ## Run the local control plane until Ctrl-C, for kubectl (KUBECONFIG=_out/dev/kubeconfig).
	$(TIMINGS)
	hack/dev.sh

##@ Test

.PHONY: dev-node
dev-node: setup images ## The local control plane with a real node (containerd, kubelet) and the images loaded, until Ctrl-C (KUBECONFIG=_out/dev-node/kubeconfig); needs root.
	mkdir -p $(ROOT)/_out/dev-node
	$(BIN)/netfleet-dev --node --load $(ROOT)/_out/images/operator.tar --load $(ROOT)/_out/images/gameserver.tar \
		--kubeconfig-out $(ROOT)/_out/dev-node/kubeconfig --ready-file $(ROOT)/_out/dev-node/ready

# make test runs as one graph of jobs: the set-up, the race-detector test binaries beside the
# control plane, then the race-detector tests, then the congestion lab; the fuzz targets once the
# commands are built (their binaries reuse that build: hack/fuzz.sh), at the lowest CPU priority,
# in the share of the cores the other jobs leave idle; the real-node tier last, which alone waits
# for the node's parts.
# golangci-lint runs beside the race-detector tests, at a lower CPU priority, in the share of the
# cores they leave idle (they spend much of their time waiting on processes and real-time loops);
# make test fails if it does. (The set-up jobs are goals of the sub-make too, for the order between
# them; see AFTER.)
.PHONY: test
test: deps ## Install what is needed, verify, and run every test.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(TEST_SETUP) test/race-bins test/race test/congestion test/fuzz test/node || rc=$$?; $(TIMINGS); exit $${rc:-0}

.PHONY: test/race test/race-bins test/congestion test/fuzz test/node
test/race: tools test-assets tool/helm verify/check build test/race-bins
	hack/test.sh race
# The race-detector test binaries, after go vet, which compiled their packages; in make test
# beside the control plane (which the tests need; its build leaves part of a core idle), below
# its CPU priority.
test/race-bins: verify/check
	$(if $(filter test/race,$(MAKECMDGOALS)),nice -n 10) hack/test.sh racebuild
test/congestion: tools build/cgo | test/race
	hack/test.sh congestion
test/fuzz: | $(call AFTER,build/static build/cgo)
	$(if $(filter test/race,$(MAKECMDGOALS)),FUZZ_NICE=19) hack/test.sh fuzz
test/node: node-assets | test/race test/congestion
	hack/test.sh node

.PHONY: test-only
test-only: ## Run every test, assuming set-up is done.
	hack/test.sh

.PHONY: soak
soak: setup ## Soak for SOAK_DURATION (default 30m; not in CI): churn, impairment, live edits; RSS and goroutines must stay flat; _out/soak/.
	hack/soak.sh

.PHONY: bench
bench: deps test-assets ## Run the Go benchmarks and the hack/ benchmark drivers.
	hack/bench.sh

.PHONY: bench-congestion
bench-congestion: deps ## Run the congestion-response scenario, controller enabled vs disabled; table, JSON and PNG in _out/bench/.
	go run ./hack/bench-congestion --out $(ROOT)/_out/bench

.PHONY: fuzz
fuzz: deps ## Run every fuzz target for FUZZTIME each (default 3s; try FUZZTIME=2m).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: help
help: ## List targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
