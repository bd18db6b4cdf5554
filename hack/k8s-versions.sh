#!/usr/bin/env bash
# k8s-versions.sh (make test-k8s-versions): the end-to-end suite on each
# Kubernetes version of K8S_VERSIONS (default: the oldest and the newest
# maintained minors, v1.35.4 and v1.37.2), one fresh cluster each
# (hack/e2e.sh: cluster-up, go test -tags e2e, cluster-down). The binaries of
# each version are built from the module proxy and cached on first use.
#
# Prints a table (version, build, e2e, tests passed/failed/skipped, result)
# and writes it with each run's log to _output/k8s-versions/. Exits non-zero
# when any version fails.
set -uo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=k8s-versions
cd "$MULTINET_ROOT"

VERSIONS=(${K8S_VERSIONS:-v1.35.4 v1.37.2})
OUT=$MULTINET_ROOT/_output/k8s-versions
mkdir -p "$OUT"
rows=()
failed=0
for v in "${VERSIONS[@]}"; do
  log "=== Kubernetes $v: build (cached after the first time)"
  t0=$SECONDS
  if ! (K8S_VERSION=$v && . hack/lib/cluster.sh && ensure_k8s_binaries) >"$OUT/$v-build.log" 2>&1; then
    tail -n 20 "$OUT/$v-build.log" >&2
    rows+=("$v $((SECONDS - t0))s - - - - - FAIL(build)")
    failed=1
    continue
  fi
  build=$((SECONDS - t0))
  log "=== Kubernetes $v: e2e (hack/e2e.sh; log $OUT/$v-e2e.log)"
  t1=$SECONDS
  K8S_VERSION=$v hack/e2e.sh >"$OUT/$v-e2e.log" 2>&1
  rc=$?
  e2e=$((SECONDS - t1))
  pass=$(grep -c -- '^--- PASS' "$OUT/$v-e2e.log")
  fail=$(grep -c -- '^--- FAIL' "$OUT/$v-e2e.log")
  skip=$(grep -c -- '^--- SKIP' "$OUT/$v-e2e.log")
  result=PASS
  if ((rc != 0)); then result="FAIL(rc=$rc)"; failed=1; fi
  rows+=("$v ${build}s ${e2e}s $pass $fail $skip $result")
  log "Kubernetes $v: $result in ${e2e}s ($pass passed, $fail failed, $skip skipped)"
done

{
  printf '%-9s %-8s %-8s %-6s %-6s %-6s %s\n' VERSION BUILD E2E PASS FAIL SKIP RESULT
  for r in "${rows[@]}"; do
    # shellcheck disable=SC2086
    printf '%-9s %-8s %-8s %-6s %-6s %-6s %s\n' $r
  done
} | tee "$OUT/summary.txt"
exit "$failed"
