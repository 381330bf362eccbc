# helm-controller with waitStrategy: afterHooks
#
# Everything the tests need is built from Go modules by this Makefile; the
# cluster binaries are cached outside the checkout (hack/tools/build.sh).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN_DIR ?= $(CURDIR)/bin
CLUSTER_DIR ?= $(CURDIR)/.cluster
GO_TEST_FLAGS ?= -count=1
# Packages that need no cluster binaries beyond envtest's API server.
UNIT_PKGS = $$(go list ./... | grep -v '/test/')
E2E_PKGS = ./test/...

export HELM_CONTROLLER_TOOLS_BIN ?= $(shell hack/tools/build.sh --print-bin-dir 2>/dev/null)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## List every target with its purpose.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build the helm-controller binary into bin/.
	go build -o $(BIN_DIR)/helm-controller .

.PHONY: generate
generate: ## Regenerate deepcopy code, the CRD and the RBAC role.
	go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	go tool controller-gen crd paths=./api/... output:crd:dir=config/crd/bases
	go run ./hack/crd-dedupe config/crd/bases/*.yaml
	go tool controller-gen rbac:roleName=helm-controller-manager paths=./internal/... output:rbac:dir=config/rbac

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
		echo "generated files are stale; run 'make generate' and commit:"; \
		git status --porcelain -- api config; git diff -- api config | head -50; exit 1; fi

.PHONY: vet
vet: ## Run go vet on every package.
	go vet ./...

.PHONY: tools
tools: ## Build (or reuse cached) etcd, kube-*, kwok and source-controller.
	hack/tools/build.sh >/dev/null

##@ Test

.PHONY: test
test: tools vet test-unit test-e2e ## Run every test: unit, envtest and end-to-end.

.PHONY: test-unit
test-unit: tools ## Unit and envtest tests (no full cluster).
	go test $(GO_TEST_FLAGS) $(UNIT_PKGS)

.PHONY: test-e2e
test-e2e: tools ## End-to-end tests on throwaway local clusters.
	go test $(GO_TEST_FLAGS) -timeout 60m $(E2E_PKGS)

##@ Demo

.PHONY: demo
demo: tools ## Show afterHooks vs beforeHooks vs disableWait side by side on a throwaway cluster.
	go run ./hack/demo

##@ Local cluster

.PHONY: cluster-up
cluster-up: tools ## Start a local cluster in .cluster/ (kubeconfig: .cluster/kubeconfig).
	go run ./hack/cluster up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster started by cluster-up.
	go run ./hack/cluster down --dir $(CLUSTER_DIR)

.PHONY: run
run: cluster-up build ## Start the local cluster and run the controller against it.
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig RUNTIME_NAMESPACE=flux-system \
		$(BIN_DIR)/helm-controller --watch-all-namespaces --enable-leader-election=false \
		--metrics-addr=127.0.0.1:0 --health-addr=127.0.0.1:0 --log-encoding=console
