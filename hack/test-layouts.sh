#!/usr/bin/env bash
# test-layouts.sh: the whole e2e suite on each node layout
# (docs/local-cluster.md "Node layouts"): one 3-node cluster (NODES=3, its
# default NODE_LAYOUTS "plain k3s nixos"), the single-node tests once on
# each node (E2E_NODE: the host, multinet-node2, multinet-node3), then the
# TestMultiNode* tests once, then cluster-down (even on failure). After the
# go tests on each node, Multus's e2e scenarios (hack/multus-e2e.sh) run on
# that node too (E2E_MULTUS=0 leaves them out). Exits 1
# when any run failed, after all ran; lists which.
#
# make test runs the single-node tests on one node only (multinet-node2, the
# k3s layout) to stay within its time budget (docs/decisions/cluster.md
# "Node layouts"); this is the full matrix, about three times as long.
#
# E2E_FLAGS adds go test flags to every run; E2E_KEEP_CLUSTER=1 leaves the
# cluster up.
set -uo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=test-layouts
cd "$MULTINET_ROOT" || exit 1
export NODES=3
# Two netdev pool devices on every extra node (make test-multinode's default
# gives node 3 one, so that the pools differ): the single-node tests that
# put two devices in one pod (TestDeviceNetdevPod) run on each node. The
# pools still differ from the host's four.
export EXTRA_NODE_NETDEVS=${EXTRA_NODE_NETDEVS:-2 2}

down() {
  if [[ ${E2E_KEEP_CLUSTER:-} == 1 ]]; then
    log "E2E_KEEP_CLUSTER=1: leaving the cluster up (make cluster-down stops it)"
    return 0
  fi
  hack/cluster-down.sh
}
trap 'log "interrupted; stopping the cluster"; down; exit 130' INT TERM

hack/cluster-up.sh
rc=$?
if ((rc != 0)); then
  log "cluster-up failed (exit $rc)"
  down
  exit "$rc"
fi
# shellcheck source=hack/lib/nodes.sh
. hack/lib/nodes.sh
load_env

failed=()
skip_bench=()
[[ ${MULTINET_E2E_BENCH:-} == 1 ]] || skip_bench=(-skip '^TestMultiNodeIPAMBench$')
for k in 1 2 3; do
  if ((k == 1)); then node=$NODE_NAME; else node=$(extra_node_name "$k"); fi
  log "the single-node tests on $node ($(node_layout "$k") layout)"
  t=$SECONDS
  # shellcheck disable=SC2086
  E2E_NODE=$node go test -tags e2e -count=1 -timeout 40m -v -skip '^TestMultiNode' ${E2E_FLAGS:-} ./test/e2e/... ||
    failed+=("single-node tests on $node ($(node_layout "$k"))")
  if [[ ${E2E_MULTUS:-1} == 1 ]]; then
    MULTUS_E2E_NODE=$node hack/multus-e2e.sh ||
      failed+=("Multus's e2e scenarios on $node ($(node_layout "$k"))")
  fi
  log "done on $node in $((SECONDS - t))s"
done
log "the multi-node tests (TestMultiNode*)"
# shellcheck disable=SC2086
go test -tags e2e -count=1 -timeout 40m -v -run '^TestMultiNode' "${skip_bench[@]}" ${E2E_FLAGS:-} ./test/e2e/... ||
  failed+=("multi-node tests")

down
down_rc=$?
if ((${#failed[@]})); then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "passed on every layout: $NODE_LAYOUTS"
exit "$down_rc"
