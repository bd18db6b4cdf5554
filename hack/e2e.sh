#!/usr/bin/env bash
# e2e.sh: make cluster-up, run the end-to-end tests (go test -tags e2e
# ./test/e2e/...) against it, then Multus's e2e scenarios (hack/multus-e2e.sh)
# on the same cluster, and make cluster-down even when they fail. Exits with
# the first failure's code: the go tests', else the Multus scenarios' (or
# cluster-up's / cluster-down's when those fail).
#
# E2E_KEEP_CLUSTER=1 leaves the cluster running for debugging.
# E2E_FLAGS adds go test flags (e.g. E2E_FLAGS='-run TestCRDs').
# E2E_MULTUS=1|0 runs the Multus scenarios or not; default: 1 unless E2E_FLAGS
# is set (a chosen subset of the go tests). They run on E2E_NODE, the node of
# the single-node go tests (docs/decisions/cluster.md, "make test — Multus's
# e2e scenarios after the e2e suite").
set -uo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=e2e
cd "$MULTINET_ROOT"

down() {
  if [[ ${E2E_KEEP_CLUSTER:-} == 1 ]]; then
    log "E2E_KEEP_CLUSTER=1: leaving the cluster up (make cluster-down stops it)"
    return 0
  fi
  hack/cluster-down.sh
}

diagnose() {
  log "diagnostics after the failure:"
  kc get nodes -o wide >&2 || true
  kc get pods -A -o wide >&2 || true
  kc get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 25 >&2 || true
  local c
  for c in "${COMPONENTS[@]}"; do component_alive "$c" || explain_failure "$c"; done
  # The extra nodes of a multi-node cluster (hack/lib/nodes.sh).
  local f n
  for f in "$PID_DIR"/*-holder.pid; do
    [[ -e $f ]] || continue
    n=$(basename "$f" -holder.pid)
    for c in containerd kubelet kube-proxy; do component_alive "$n-$c" || explain_failure "$n-$c"; done
  done
}

interrupted() {
  log "interrupted; stopping the cluster"
  down
  exit 130
}
trap interrupted INT TERM

hack/cluster-up.sh
rc=$?
if ((rc != 0)); then
  # ($? after `if ! cmd` is the negation's 0: keep the real code.)
  log "cluster-up failed (exit $rc)"
  down
  exit "$rc"
fi

# What this cluster cannot run is left out by name rather than skipped (a
# skip fails under CI=true, internal/testing/testskip): the multi-node tests on a
# cluster of fewer than 3 nodes, the IPAM benchmark unless asked for.
not_here=()
((${NODES:-1} >= 3)) || not_here+=('TestMultiNode')
[[ ${MULTINET_E2E_BENCH:-} == 1 ]] || not_here+=('TestMultiNodeIPAMBench')
skip_flag=()
if ((${#not_here[@]})); then
  skip_flag=(-skip "^($(IFS='|'; echo "${not_here[*]}"))")
  log "not run on this cluster: ${not_here[*]}"
fi
log "running go test -tags e2e ./test/e2e/..."
# shellcheck disable=SC2086
go test -tags e2e -count=1 -timeout 40m -v "${skip_flag[@]}" ${E2E_FLAGS:-} ./test/e2e/...
rc=$?
((rc == 0)) || diagnose

# Multus's scenarios, after the go tests so that their two multinetd
# restarts disturb no go test; also when a go test failed (their verdict is
# reported either way, the exit code is the go tests').
if [[ ${E2E_MULTUS:-$([[ -z ${E2E_FLAGS:-} ]] && echo 1)} == 1 ]]; then
  log "running hack/multus-e2e.sh on ${E2E_NODE:-the host}"
  t0=$SECONDS
  MULTUS_E2E_NODE=${E2E_NODE:-} hack/multus-e2e.sh
  mrc=$?
  log "Multus's scenarios: exit $mrc in $((SECONDS - t0))s"
  if ((mrc != 0)); then
    diagnose
    ((rc != 0)) || rc=$mrc
  fi
fi

down
down_rc=$?
if ((rc == 0 && down_rc != 0)); then
  log "tests passed but cluster-down left something behind"
  exit "$down_rc"
fi
exit "$rc"
