#!/usr/bin/env bash
# chaos.sh [FLAGS]: the chaos suite (make chaos, make chaos-short;
# docs/chaos.md). Builds test/chaos (build tag chaos) and runs it with FLAGS
# against the local cluster: rounds of scaling a three-network Deployment
# 0→N→0 while multinetd is SIGKILLed, the kubelet restarted, the API server
# paused and a record corrupted, with pods on a hanging delegate alongside;
# then it counts what is left by kind. It exits 1 when a round's pods were not
# all Running with complete network-status within -converge after the last
# fault, when a fault did not happen, or on any leak (docs/chaos.md).
#
# When the cluster is up and healthy it is used and left up. Otherwise this
# script runs cluster-up first and cluster-down after (CHAOS_KEEP_CLUSTER=1
# keeps it). The report goes to stdout and to _output/chaos/report-<time>.txt.
set -uo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=chaos
cd "$MULTINET_ROOT"
export MULTINET_ROOT

OUT_DIR=$MULTINET_ROOT/_output/chaos
mkdir -p "$OUT_DIR"

# The suite SIGSTOPs the API server for a few seconds; whatever happens to
# the suite, the API server must not stay stopped.
resume_apiserver() {
  local pid
  pid=$(component_pid kube-apiserver 2>/dev/null) || return 0
  if [[ $(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null) == T ]]; then
    log "the API server (pid $pid) is stopped; sending SIGCONT"
    kill -CONT "$pid" 2>/dev/null || true
  fi
}

brought_up=0
finish() {
  local rc=$1
  resume_apiserver
  if ((brought_up)) && [[ ${CHAOS_KEEP_CLUSTER:-} != 1 ]]; then
    hack/cluster-down.sh || { ((rc == 0)) && rc=1; }
  fi
  exit "$rc"
}
trap 'finish 130' INT TERM

log "unit tests of test/chaos (the verdict)"
go test -tags chaos ./test/chaos/ || die "go test -tags chaos ./test/chaos/ failed"
log "building test/chaos"
go build -tags chaos -o "$OUT_DIR/chaos" ./test/chaos || die "go build -tags chaos ./test/chaos failed"

load_env
if ! cluster_healthy; then
  log "no healthy local cluster: make cluster-up (and cluster-down afterwards)"
  brought_up=1
  hack/cluster-up.sh || finish $?
  load_env
fi

report=$OUT_DIR/report-$(date -u +%Y%m%dT%H%M%SZ).txt
t0=$SECONDS
MULTINET_CLUSTER_ENV=$ENV_FILE "$OUT_DIR/chaos" -env "$ENV_FILE" "$@" | tee "$report"
rc=${PIPESTATUS[0]}
log "chaos suite exit $rc after $((SECONDS - t0))s; report: $report"
finish "$rc"
