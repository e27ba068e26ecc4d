# netfleet — build, test and demo entry points. `make test` and `make demo` install everything
# they need on a fresh Debian machine (as root) and cache it under bin/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
KUBE_VERSION := v1.37.2
export KUBEBUILDER_ASSETS := $(BIN)/k8s/$(KUBE_VERSION)
export PATH := $(BIN):$(KUBEBUILDER_ASSETS):$(PATH)

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

.PHONY: deps
deps: ## Install the Debian packages netfleet needs (only the missing ones).
	hack/install-deps.sh

.PHONY: tools
tools: ## Install the pinned Go tools into bin/.
	hack/install-tools.sh

.PHONY: test-assets
test-assets: ## Build kube-apiserver, etcd and kubectl into bin/k8s/<version> (skipped when present).
	hack/install-test-assets.sh

# After the control plane: the kubelet and its peers share most of kube-apiserver's packages, which
# then compile once.
.PHONY: node-assets
node-assets: test-assets ## Install runc and iptables; build kubelet, kube-proxy, the scheduler, the controller manager, containerd, the CNI plugins and pause into bin/node/ (skipped when present).
	hack/install-node.sh

# The tools, the control plane and the node parts build two at a time: each go build leaves a core
# idle while it downloads modules and links, which the other fills.
.PHONY: setup
setup: deps ## deps, then tools, test-assets and node-assets two at a time.
	$(MAKE) --no-print-directory -j2 tools test-assets node-assets

##@ Code generation

.PHONY: generate
generate: dashboards ## Generate deepcopy code, the netcode validator's ranges and the Grafana dashboards.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	go run ./hack/netcode-bounds -dir api/netcode

.PHONY: dashboards
dashboards: ## Generate the Grafana dashboards into charts/netfleet/dashboards (hack/dashboards).
	go run ./hack/dashboards -out charts/netfleet/dashboards

.PHONY: manifests
manifests: ## Generate CRDs and RBAC into config/ and the chart.
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=netfleet-operator paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

.PHONY: verify
verify: generate manifests ## Regenerate and fail on any diff; gofmt, go vet, golangci-lint.
	hack/verify.sh

##@ Build

.PHONY: build
build: ## Build every command into bin/ (the operator with CGO_ENABLED=0).
	hack/build.sh

.PHONY: c-client
c-client: ## Build the C client library (clients/c): build/libnetfleet.so, libnetfleet.a and netfleet.pc with gcc -std=c99 -Wall -Wextra -Werror.
	$(MAKE) -C clients/c lib

.PHONY: images
images: build ## Build the operator and game-server images from bin/ as OCI archives in _out/images/ (no Docker engine needed).
	go run ./hack/images -bin $(BIN) -out $(ROOT)/_out/images

##@ Run

.PHONY: demo
demo: setup ## Run netfleet end to end on this machine: a Fleet, bots through linkem, a live netcode change; report in _out/demo/.
	hack/demo.sh

.PHONY: dev
dev: setup ## Run the local control plane until Ctrl-C, for kubectl (KUBECONFIG=_out/dev/kubeconfig).
	hack/dev.sh

##@ Test

.PHONY: dev-node
dev-node: setup images ## The local control plane with a real node (containerd, kubelet) and the images loaded, until Ctrl-C (KUBECONFIG=_out/dev-node/kubeconfig); needs root.
	mkdir -p $(ROOT)/_out/dev-node
	$(BIN)/netfleet-dev --node --load $(ROOT)/_out/images/operator.tar --load $(ROOT)/_out/images/gameserver.tar \
		--kubeconfig-out $(ROOT)/_out/dev-node/kubeconfig --ready-file $(ROOT)/_out/dev-node/ready

.PHONY: test
test: setup verify ## Install what is needed, verify, and run every test.
	hack/test.sh

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
