# Flotilla — run `make help` for the targets.
SHELL := /usr/bin/env bash
export GONOSUMDB ?= k8s.io,sigs.k8s.io
export GOFLAGS ?= -mod=mod -buildvcs=false
BIN := $(CURDIR)/bin
FLOTILLA := $(BIN)/flotilla
E2E_TIMEOUT ?= 30m

.DEFAULT_GOAL := help

help: ## Show the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

tools: ## Build the pinned local-fleet tools and controller-gen into bin/ (skipped when pins are unchanged)
	@hack/build-tools.sh

# Without cgo, as the images are built (and as Go builds on a machine with no C compiler): a
# cgo build exports every symbol for kustomize's plugin loader, 40 MB more binary and resident
# file pages in every process.
build: ## Build the flotilla CLI, flotilla-controller-manager, flotilla-agent and the fleet's small flotilla-supervisor into bin/
	CGO_ENABLED=0 go build -o $(FLOTILLA) ./cmd/flotilla
	CGO_ENABLED=0 go build -o $(BIN)/flotilla-controller-manager ./cmd/flotilla-controller-manager
	CGO_ENABLED=0 go build -o $(BIN)/flotilla-agent ./cmd/flotilla-agent
	CGO_ENABLED=0 go build -o $(BIN)/flotilla-supervisor ./cmd/flotilla-supervisor

# api/ is a Go module of its own (github.com/flotilla-dev/flotilla/api), so patterns like ./...
# in the root module do not reach it: every go command and generator runs in it as well.
generate: tools ## Regenerate deepcopy code, CRD YAML, apply configurations, the manager role (from +kubebuilder:rbac markers) and config/install.yaml
	cd api && $(BIN)/controller-gen object paths=./...
	cd api && $(BIN)/controller-gen crd:allowDangerousTypes=false paths=./... output:crd:artifacts:config=$(CURDIR)/config/crd/bases
	$(BIN)/controller-gen rbac:roleName=flotilla:controller-manager paths=./internal/... output:rbac:artifacts:config=$(CURDIR)/config/rbac
	{ echo "# Written by make generate from config/crd/bases."; echo "apiVersion: kustomize.config.k8s.io/v1beta1"; \
	  echo "kind: Kustomization"; echo "resources:"; cd config/crd && ls bases | sed 's/^/- bases\//'; } > config/crd/kustomization.yaml
	{ echo "# Written by make generate: kubectl kustomize config/default. flotilla install applies it."; \
	  $(BIN)/kubectl kustomize config/default; } > config/install.yaml
	rm -rf api/applyconfiguration
	cd api && $(BIN)/applyconfiguration-gen --output-dir applyconfiguration \
		--output-pkg github.com/flotilla-dev/flotilla/api/applyconfiguration ./*/v1alpha1

image: ## Build the controller-manager's OCI image (amd64, arm64) with its SBOM into dist/image, without Docker
	go run ./hack/image --out dist/image

image-agent: ## Build flotilla-agent's OCI image (amd64, arm64), for Pull members, into dist/agent-image
	go run ./hack/image --package ./cmd/flotilla-agent --out dist/agent-image

krew: ## Package the CLI as the kubectl plugin (linux, darwin; amd64, arm64) with its krew manifest into dist/krew (VERSION=v0.5.0)
	go run ./hack/krew --out dist/krew --version $(or $(VERSION),v0.0.0-dev)

docs: ## Regenerate the CLI and API references in docs/reference from the command tree and the CRDs
	go run ./hack/docgen

verify: generate docs ## Fail when generated files, references or formatting are out of date, or a layout rule is broken (hack/shape)
	@git diff --exit-code -- api config || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- api config)" || { git status --short --untracked-files=all -- api config; echo "generated files are new or stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- docs/reference)" || { git status --short --untracked-files=all -- docs/reference; echo "docs/reference is stale: run make docs and commit"; exit 1; }
	@test -z "$$(gofmt -l api cmd internal test config hack)" || { gofmt -l api cmd internal test config hack; echo "run gofmt -w"; exit 1; }
	go run ./hack/shape

lint: ## Vet and format-check the code
	go vet ./...
	cd api && go vet ./...
	@test -z "$$(gofmt -l api cmd internal test config hack)" || { gofmt -l api cmd internal test config hack; echo "gofmt needed"; exit 1; }

test: tools build ## Unit tests, then end-to-end tests on a local fleet (installs the Debian packages they run)
	@hack/test-deps.sh
	cd api && go test ./...
	go test ./config/... ./internal/... ./cmd/... ./hack/...
	FLOTILLA_BIN_DIR=$(BIN) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/...

e2e: tools build ## End-to-end tests only
	FLOTILLA_BIN_DIR=$(BIN) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/... $(if $(RUN),-run '$(RUN)')

demo: tools build ## Local fleet up, then a bad release rolled back by Prometheus analysis and a good one through every wave
	$(FLOTILLA) up --bin-dir $(BIN)
	$(FLOTILLA) get clusters -o wide
	$(FLOTILLA) demo --bin-dir $(BIN)
	@hack/next-steps.sh

bench: tools build ## Print figures: fleet up time, memory, failure detection; propagation vs a plain SSA client
	$(FLOTILLA) bench up --bin-dir $(BIN)
	$(FLOTILLA) bench propagate --bin-dir $(BIN)

# The issue's size by default (about 19 GiB for 100 slim members); smaller with e.g.
# make bench-scale MEMBERS=20 TEMPLATES=250.
MEMBERS ?= 100
TEMPLATES ?= 1000
bench-scale: tools build ## Print figures at scale: MEMBERS slim members, TEMPLATES Deployments on each (see docs/concepts.md)
	$(FLOTILLA) bench scale --bin-dir $(BIN) --members $(MEMBERS) --templates $(TEMPLATES)

down: ## Stop the local fleet started by make demo
	$(FLOTILLA) down

.PHONY: help tools build image image-agent krew generate docs verify lint test e2e demo bench bench-scale down
