#!/usr/bin/env bash
# test-flakes.sh: the flake hunt (make test-flakes). Runs the unit suite with
# -race -count=FLAKE_COUNT (default 10), then the e2e suite FLAKE_E2E_RUNS
# times (default 3, each on a fresh cluster: hack/e2e.sh), every stage while a
# second build loads the CPUs (FLAKE_LOAD=0 turns the load off), and prints
# every test that failed at least once with how many times. Exits 1 when any
# test failed. The go test -json streams stay in _output/flakes/.
#
#   FLAKE_STAGES  "unit e2e" (default), or one of them
#   FLAKE_PKGS    the unit packages (default ./...)
#   FLAKE_RUN     a -run pattern for both stages (default: all)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=hack/lib/cluster.sh
. hack/lib/cluster.sh
LOG_PREFIX=flakes

count=${FLAKE_COUNT:-10}
e2e_runs=${FLAKE_E2E_RUNS:-3}
read -r -a stages <<<"${FLAKE_STAGES:-unit e2e}"
out=_output/flakes
mkdir -p "$out"
rm -f "$out"/*.json

# load builds multinet's commands from scratch (a private, emptied build
# cache) over and over: "another build running" on the same CPUs.
load_pid=
start_load() {
  [[ ${FLAKE_LOAD:-1} == 1 ]] || return 0
  local cache
  cache=$(mktemp -d)
  (while :; do
    rm -rf "${cache:?}"/*
    GOCACHE=$cache nice -n 5 go build -o /dev/null ./cmd/... >/dev/null 2>&1
  done) &
  load_pid=$!
  log "background build load started (pid $load_pid)"
}
stop_load() {
  [[ -n $load_pid ]] || return 0
  pkill -P "$load_pid" 2>/dev/null; kill "$load_pid" 2>/dev/null; wait "$load_pid" 2>/dev/null
  load_pid=
}
trap 'stop_load' EXIT

run_flag=()
[[ -n ${FLAKE_RUN:-} ]] && run_flag=(-run "$FLAKE_RUN")

rc=0
for stage in "${stages[@]}"; do
  start_load
  case $stage in
  unit)
    make --no-print-directory packages apiserver
    log "unit suite: go test -race -count=$count ${FLAKE_PKGS:-./...}"
    MULTINET_REQUIRE_APISERVER=1 go test -race -count="$count" -timeout 90m -json "${run_flag[@]}" \
      ${FLAKE_PKGS:-./...} >"$out/unit.json" || rc=1
    ;;
  e2e)
    for i in $(seq 1 "$e2e_runs"); do
      log "e2e run $i of $e2e_runs"
      E2E_FLAGS="-json ${run_flag[*]}" hack/e2e.sh >"$out/e2e-$i.json" || rc=1
    done
    ;;
  *) die "unknown FLAKE_STAGES entry $stage (unit, e2e)" ;;
  esac
  stop_load
done

# Every test that failed, by how many runs it failed in.
echo "== flake hunt: tests that failed (runs failed, test)"
cat "$out"/*.json 2>/dev/null | grep '^{' |
  jq -r 'select(.Action == "fail" and .Test != null) | "\(.Package) \(.Test)"' | sort | uniq -c | sort -rn |
  tee "$out/failed.txt"
[[ -s $out/failed.txt ]] || echo "  none"
echo "== flake hunt: $( ((rc == 0)) && echo PASS || echo FAIL) (count=$count, e2e runs=$e2e_runs, load=${FLAKE_LOAD:-1}; streams in $out)"
exit "$rc"
