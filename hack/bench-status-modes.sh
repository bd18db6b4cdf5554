#!/usr/bin/env bash
# bench-status-modes.sh [BENCH FLAGS]: hack/bench.sh once per network-status
# mode of the deployed multinetd: asyncStatus false (as deployed),
# then true, then the deployed configuration again. Switching is a redeploy:
# the DaemonSet's config volume is pointed at a copy of its ConfigMap with
# `asyncStatus: true` appended, the rollout awaited, and at the end (also on
# failure or Ctrl-C) the volume is pointed back and the copy deleted. Each
# run's table goes to _output/bench/results-<mode>.md; uptime is printed
# before each run. Needs the local cluster with multinetd deployed (make
# cluster-up) and holds no lock itself: hold /tmp/cluster.lock around it.
#
#   hack/bench-status-modes.sh -n 60 -concurrency 10 -concurrency-reps 1 -rss-pods 10
set -euo pipefail
# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=bench-modes
cd "$MULTINET_ROOT"
load_env

NS=multinet-system
DS=multinetd
COPY=multinetd-config-async-bench
VOLUME_PATH='{.spec.template.spec.volumes[?(@.name=="config")].configMap.name}'

orig=$(kc -n "$NS" get ds "$DS" -o jsonpath="$VOLUME_PATH")
[[ -n $orig ]] || die "the $DS DaemonSet has no config ConfigMap volume: is multinetd deployed (make cluster-up)?"
[[ $orig != "$COPY" ]] || die "the $DS DaemonSet already uses $COPY (an earlier run did not restore it): point it back to the generated multinetd-config-* ConfigMap"

# use_config NAME points the DaemonSet's config volume at ConfigMap NAME and
# waits for the new multinetd to be rolled out and its socket to answer.
use_config() {
  local idx
  idx=$(kc -n "$NS" get ds "$DS" -o json | jq '[.spec.template.spec.volumes[].name] | index("config")')
  kc -n "$NS" patch ds "$DS" --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/volumes/$idx/configMap/name\",\"value\":\"$1\"}]" >/dev/null
  kc -n "$NS" rollout status ds "$DS" --timeout=180s >/dev/null
  kc -n "$NS" wait pod -l app.kubernetes.io/name=multinetd --for=condition=Ready --timeout=120s >/dev/null
}

restored=0
restore() {
  ((restored)) && return 0
  restored=1
  log "restoring $DS's configuration ($orig)"
  use_config "$orig" || log "could not restore $DS's config volume to $orig: do it by hand"
  kc -n "$NS" delete configmap "$COPY" --ignore-not-found >/dev/null || true
}
trap 'restore' EXIT
trap 'exit 130' INT TERM

run() {
  local mode=$1
  shift
  log "asyncStatus $mode: $(uptime)"
  # A non-default configuration: its dated report (with pictures) goes to
  # _output, never to docs/bench nor docs/bench.md's latest run.
  BENCH_REPORT_DIR="_output/bench/async-$mode" BENCH_PAGE='' hack/bench.sh "$@"
  cp _output/bench/results.md "_output/bench/results-async-$mode.md"
}

cfg=$(kc -n "$NS" get configmap "$orig" -o jsonpath='{.data.multinetd\.yaml}')
if grep -Eq '^asyncStatus:' <<<"$cfg"; then
  die "$orig sets asyncStatus itself; this script only adds it"
fi
run false "$@"

printf '%s\n# bench-status-modes.sh\nasyncStatus: true\n' "$cfg" >"_output/bench/multinetd-async.yaml"
kc -n "$NS" delete configmap "$COPY" --ignore-not-found >/dev/null
kc -n "$NS" create configmap "$COPY" --from-file=multinetd.yaml=_output/bench/multinetd-async.yaml >/dev/null
log "redeploying $DS with asyncStatus: true"
use_config "$COPY"
run true "$@"
restore
log "tables: _output/bench/results-async-false.md, _output/bench/results-async-true.md"
