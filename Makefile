# multinet — the project's vocabulary. `make help` lists the targets.
#
# Tests run against a real single-node cluster (make cluster-up; see
# docs/local-cluster.md). Everything built or started goes under _output/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
OUT      := _output
FUZZTIME ?= 30s
BENCHTIME ?= 1s
# -race needs a C toolchain; RACE= (empty) turns it off.
RACE     ?= $(shell command -v gcc >/dev/null 2>&1 && echo -race)
UNIT_TIMEOUT ?= 15m

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every cmd/... into _output/bin (-tags grpcnotrace, as the images: docs/bench.md "Binary size")
	@mkdir -p $(OUT)/bin
	@if [[ -d cmd ]]; then $(GO) build -tags grpcnotrace -o $(OUT)/bin/ ./cmd/...; ls $(OUT)/bin; else echo "no cmd/ yet"; fi

.PHONY: generate
generate: ## regenerate deepcopy code, CRDs and the typed client in pkg/client (hack/update-codegen.sh)
	@if [[ -x hack/update-codegen.sh ]]; then hack/update-codegen.sh; else echo "hack/update-codegen.sh not present; nothing to generate"; fi

.PHONY: verify
verify: ## gofmt check, go vet (also the e2e tag), no deprecated API (staticcheck SA1019), generated code up to date, no reachable known vulnerability (hack/govulncheck.sh)
	hack/verify.sh

.PHONY: test
test: ## verify, test-unit, test-multinode (the whole e2e suite on a 3-node cluster: single-node tests on multinet-node2, then the multi-node tests, then Multus's e2e scenarios on multinet-node2), chaos-short; each stage timed, the allowed skips printed first (hack/test.sh). test-e2e (the suite on 1 node) is not in it: make test-e2e
	hack/test.sh

.PHONY: skips
skips: ## the tests that may skip under CI=true, with why (internal/testing/testskip/allowed.txt); any other skip fails there
	@echo "== tests that may skip under CI=true (internal/testing/testskip/allowed.txt); any other skip fails its test"
	@grep -vE '^[[:space:]]*(#|$$)' internal/testing/testskip/allowed.txt | sed 's/^/  /'

.PHONY: packages
packages: ## install the Debian packages the tests and the cluster need when any is missing (hack/lib/cluster.sh ensure_packages)
	@mkdir -p $(OUT) && bash -c '. hack/lib/cluster.sh && ensure_packages'

.PHONY: apiserver
apiserver: ## build the kube-apiserver the package tests run (internal/testing/apiservertest) when it is missing (hack/lib/cluster.sh ensure_k8s_binaries, cached under ~/.cache/multinet/k8s)
	@mkdir -p $(OUT) && bash -c '. hack/lib/cluster.sh && K8S_COMMANDS=(kube-apiserver) && ensure_k8s_binaries'

.PHONY: test-unit
test-unit: packages apiserver ## go test ./... in the product module, hack/tools and deploy/observability (no e2e), then promtool check rules and test rules on the alert rules, with -race when a C compiler is present (packages first: the hack/lib tests run jq, etcd; then kube-apiserver: with MULTINET_REQUIRE_APISERVER=1 a test needing the real API server fails instead of skipping)
	MULTINET_REQUIRE_APISERVER=1 $(GO) test $(RACE) -count=1 -timeout $(UNIT_TIMEOUT) ./...
	$(GO) -C hack/tools test $(RACE) -count=1 -timeout $(UNIT_TIMEOUT) ./...
	MULTINET_REQUIRE_APISERVER=1 $(GO) -C deploy/observability test -count=1 -timeout $(UNIT_TIMEOUT) ./...
	$(GO) -C deploy/observability tool promtool check rules rules.yaml
	$(GO) -C deploy/observability tool promtool test rules rules-tests.yaml

.PHONY: observability
observability: ## regenerate the Grafana dashboard, alert rules (plain and PrometheusRule) and PodMonitors in deploy/observability from its Go source (a module of its own: docs/operations.md), then the Helm chart that templates them (make helm)
	$(GO) -C deploy/observability run ./gen
	$(MAKE) helm

.PHONY: test-flakes
test-flakes: ## the flake hunt: unit suite -race -count=FLAKE_COUNT (10), then the e2e suite FLAKE_E2E_RUNS (3) times, under a background build load; lists every test that failed (hack/test-flakes.sh; hours)
	hack/test-flakes.sh

.PHONY: test-e2e
test-e2e: ## cluster-up, go test -tags e2e ./test/e2e/..., Multus's e2e scenarios (hack/multus-e2e.sh; E2E_MULTUS=0 leaves them out, as E2E_FLAGS does), cluster-down (even on failure); default network: containerd's conflist; NODES=3 E2E_NODE=<node> runs the single-node tests on that node
	hack/e2e.sh

.PHONY: test-multinode
test-multinode: ## the whole e2e suite on a 3-node cluster: its single-node tests on multinet-node2 (E2E_NODE; a node in namespaces of its own, not the host) and the TestMultiNode* tests across the nodes: NODES=3 cluster-up, go test -tags e2e, Multus's e2e scenarios on E2E_NODE, cluster-down (hack/e2e.sh; docs/local-cluster.md "Several nodes")
	NODES=3 E2E_NODE=$(or $(E2E_NODE),multinet-node2) hack/e2e.sh

.PHONY: test-layouts
test-layouts: ## the whole e2e suite on each node layout (plain, k3s, NixOS): NODES=3 cluster-up (NODE_LAYOUTS "plain k3s nixos"), the single-node tests on each node in turn, the TestMultiNode* tests, cluster-down (hack/test-layouts.sh; about 3x test-multinode; docs/local-cluster.md "Node layouts")
	hack/test-layouts.sh

.PHONY: test-e2e-kindnet
test-e2e-kindnet: ## the e2e suite on a cluster whose default network is kind's kindnet conflist (ptp + host-local /run/cni-ipam-state + portmap)
	DEFAULT_NETWORK=kindnet hack/e2e.sh

.PHONY: test-k8s-versions
test-k8s-versions: ## the e2e suite on the oldest and newest maintained Kubernetes minors (K8S_VERSIONS, default "v1.35.4 v1.37.2"), a fresh cluster each (hack/k8s-versions.sh; ~25 min warm)
	hack/k8s-versions.sh

.PHONY: test-multus-e2e
test-multus-e2e: ## Multus's e2e scenarios re-written for multinet (hack/multus-e2e.sh; needs cluster-up, root; restarts multinetd twice; MULTUS_E2E_NODE=<node> runs them on an extra node); make test runs them after the e2e suite
	hack/multus-e2e.sh $(MULTUS_E2E_ARGS)

# The chaos suite (hack/chaos.sh, test/chaos, docs/chaos.md): N pods on three
# networks, ROUNDS rounds of 0→N→0, KILLS multinetd SIGKILLs a round (N or MIN-MAX).
N      ?= 60
ROUNDS ?= 3
KILLS  ?= 3-5

.PHONY: chaos
chaos: ## chaos suite: ROUNDS rounds of 0→N→0 with multinetd killed KILLS times a round, kubelet restart, API server paused, a record corrupted, a hanging delegate; FAIL unless every pod is Running with complete network-status within -converge after the last fault, every fault happened and nothing leaked (CHAOS_ARGS adds flags; -break-delegate must FAIL)
	hack/chaos.sh -pods $(N) -rounds $(ROUNDS) -kills $(KILLS) $(CHAOS_ARGS)

.PHONY: chaos-short
chaos-short: ## the chaos suite's short form: one round of 0→20→0, 3 multinetd kills
	hack/chaos.sh -pods 20 -rounds 1 -kills 3 $(CHAOS_ARGS)

.PHONY: fuzz
fuzz: ## run every Fuzz target for FUZZTIME (default 30s) each
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: bench
bench: ## cluster benchmark (hack/bench.sh BENCH_ARGS; needs cluster-up, root; MULTUS_BIN_DIR=<dir> measures Multus thick side by side): writes the dated report docs/bench/<date>-<commit>.md with its SVG pictures and the latest-run block of docs/bench.md, then bench-go
	hack/bench.sh $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-go

.PHONY: multus-build
multus-build: ## build Multus thick's multus-daemon and multus-shim (MULTUS_VERSION, default v4.3.0) into the cache and print the dir, for make bench MULTUS_BIN_DIR=<dir>; optional, not part of test
	hack/multus-build.sh

.PHONY: bench-multinode
bench-multinode: ## multinet-ipam against host-local on a 3-node cluster: p50/p99, 100 allocations at once across the nodes, conflicts, API requests per allocation (NODES=3 cluster-up, TestMultiNodeIPAMBench, cluster-down; table in _output/bench/multinode-ipam.md)
	NODES=3 MULTINET_E2E_BENCH=1 E2E_FLAGS='-run TestMultiNodeIPAMBench' hack/e2e.sh

.PHONY: measure
measure: ## memory and CPU of each deployed component with MEASURE_PODS (default 50) multi-network pods (needs cluster-up)
	hack/measure-components.sh $(or $(MEASURE_PODS),50)

.PHONY: bench-go
bench-go: ## the go test -bench micro-benchmarks (BENCHTIME, default 1s)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

.PHONY: cluster-up
cluster-up: ## start the local cluster (idempotent); NODES=N (default 1) adds N-1 nodes in namespaces of their own
	hack/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## stop the local cluster and remove everything it made
	hack/cluster-down.sh

.PHONY: demo
demo: ## cluster up + a Deployment pod on the default network
	hack/demo.sh

.PHONY: images
images: ## OCI images of multinetd, webhook, deviceplugin into _output/images (imported when the local cluster runs; IMPORT=0|1, IMAGE_REPO, IMAGE_TAG)
	hack/images.sh

.PHONY: helm
helm: ## generate the Helm chart deploy/helm/multinet from deploy/ (hack/tools/helmchart; make verify checks it is current; docs/install.md "Helm")
	$(GO) -C hack/tools run ./helmchart -root $(CURDIR) -o $(CURDIR)/deploy/helm/multinet

.PHONY: manifests
manifests: ## render deploy/overlays/default into _output/deploy/default.yaml; IMAGE_DIGESTS=<file> ("<image> <repository>@sha256:<hex>" lines; make images writes _output/images/digests.txt) pins every image by digest (hack/tools/manifests)
	$(GO) -C hack/tools build -o $(CURDIR)/$(OUT)/tools/manifests ./manifests
	$(OUT)/tools/manifests -overlay deploy/overlays/default $(if $(IMAGE_DIGESTS),-digests $(IMAGE_DIGESTS)) -o $(OUT)/deploy/default.yaml

.PHONY: clean
clean: ## stop the cluster if it runs, remove _output/
	@if [[ -d $(OUT)/cluster ]]; then hack/cluster-down.sh; fi
	rm -rf $(OUT)
