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

# The set-up is a graph of small jobs — each Go tool, kube-apiserver with kubectl, etcd, each node
# part, the commands — that make runs SETUP_JOBS at a time. Each go build leaves cores idle while it
# resolves modules and links, so three at a time keep both cores of a 2-core machine busy from the
# first job to the last; the longest chain (kube-apiserver, then the kubelet, which shares most of
# its packages) is listed first so it starts first. Each step's time goes into the run's table.
SETUP_JOBS ?= 3
TOOLS := controller-gen golangci-lint gotestsum helm benchstat

.PHONY: deps
deps: ## Install the Debian packages netfleet needs (only the missing ones).
	hack/install-deps.sh

.PHONY: tools
tools: ## Install the pinned Go tools into bin/.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(addprefix tool/,$(TOOLS))

.PHONY: $(addprefix tool/,$(TOOLS))
$(addprefix tool/,$(TOOLS)):
	hack/install-tools.sh $(@F)

.PHONY: test-assets
test-assets: ## Build kube-apiserver, etcd and kubectl into bin/k8s/<version> (skipped when present).
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) control-plane/kube control-plane/etcd

.PHONY: control-plane/kube control-plane/etcd
control-plane/kube control-plane/etcd:
	hack/install-test-assets.sh $(@F)

.PHONY: node-assets
node-assets: ## Install runc and iptables; build kubelet, kube-proxy, the scheduler, the controller manager, containerd, the CNI plugins and pause into bin/node/ (skipped when present).
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(NODE_PARTS)

# After kube-apiserver: the kubelet and its peers share most of its packages, which then compile
# once. pause is compiled statically, with the libc6-dev that node/packages installs.
NODE_PARTS := node/kubernetes node/containerd node/cni node/pause
.PHONY: node/packages $(NODE_PARTS)
node/packages:
	hack/install-node.sh packages
node/kubernetes: control-plane/kube node/packages
node/containerd node/cni: node/packages
node/pause: node/packages
$(NODE_PARTS):
	hack/install-node.sh $(@F)

# What each entry point needs, the longest job first. The commands (`make build`) are part of it:
# built once, without the race detector, into bin/, where the demo runs them and the tests take
# them. The real-node tier's parts come last, so they take the cores only when netfleet's own jobs
# leave one free (node/kubernetes waits for control-plane/kube in any case).
DEMO_SETUP := control-plane/kube control-plane/etcd build
TEST_SETUP := control-plane/kube tool/golangci-lint tool/controller-gen control-plane/etcd tool/helm tool/gotestsum \
	verify build node/kubernetes node/containerd node/cni node/pause

.PHONY: setup
setup: deps ## deps, then every tool, the control plane and the node parts, SETUP_JOBS at a time.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(addprefix tool/,$(TOOLS)) control-plane/kube control-plane/etcd $(NODE_PARTS)

.PHONY: demo-setup
demo-setup: deps ## What make demo and make dev run: the Debian packages, the control plane and the commands.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(DEMO_SETUP)

.PHONY: test-setup
test-setup: deps ## What make test runs before the tests: the tools it uses, the control plane, the node parts, the commands and verify, SETUP_JOBS at a time.
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(TEST_SETUP)

##@ Code generation

.PHONY: generate
generate: dashboards tool/controller-gen ## Generate deepcopy code, the netcode validator's ranges and the Grafana dashboards.
	$(TIMED) verify "generate deepcopy" $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(TIMED) verify "generate netcode bounds" go run ./hack/netcode-bounds -dir api/netcode

.PHONY: dashboards
dashboards: ## Generate the Grafana dashboards into charts/netfleet/dashboards (hack/dashboards).
	$(TIMED) verify "generate dashboards" go run ./hack/dashboards -out charts/netfleet/dashboards

# After generate: both run controller-gen over ./api/..., whose output the other reads.
.PHONY: manifests
manifests: tool/controller-gen | generate ## Generate CRDs and RBAC into config/ and the chart.
	$(TIMED) verify "generate manifests" $(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=netfleet-operator paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

.PHONY: verify
verify: generate manifests tool/golangci-lint ## Regenerate and fail on any diff; gofmt, go vet, golangci-lint.
	hack/verify.sh

##@ Build

# When make runs verify too, after its code generation, which rewrites Go files that build reads.
.PHONY: build
build: $(if $(filter verify test-setup,$(MAKECMDGOALS)),| generate manifests) ## Build every command into bin/ (the operator with CGO_ENABLED=0).
	hack/build.sh

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

.PHONY: test
test: test-setup ## Install what is needed, verify, and run every test.
	hack/test.sh || rc=$$?; $(TIMINGS); exit $${rc:-0}

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
