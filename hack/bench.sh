#!/usr/bin/env bash
# bench.sh [flags]: the multinet benchmark on the running local cluster
# (make cluster-up first). Builds hack/tools/bench into _output/bin and runs it
# as root with the cluster's env file; flags go to the bench command
# (_output/bin/multinet-bench -h lists them, e.g. -n 100 -concurrency 10,50).
# Prints a markdown table and writes it to _output/bench/results.md.
# Also writes the dated report docs/bench/<date>-<commit>.md with its pictures
# and rewrites the "Latest run" block of docs/bench.md (docs/bench.md describes it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ENV_FILE=${MULTINET_CLUSTER_ENV:-_output/cluster/env}
if [[ ! -f $ENV_FILE ]]; then
  echo "bench: $ENV_FILE not found: start the local cluster first (make cluster-up)" >&2
  exit 1
fi
set -a
# shellcheck disable=SC1090
. "$ENV_FILE"
set +a

if ! "$KUBECTL" --kubeconfig "$KUBECONFIG" get --raw /readyz >/dev/null 2>&1; then
  echo "bench: the API server at $APISERVER_URL is not ready (make cluster-up)" >&2
  exit 1
fi
if [[ ! -s $CNI_CONF_DIR/00-multinet.conflist ]]; then
  echo "bench: $CNI_CONF_DIR/00-multinet.conflist is missing: is multinetd the cluster's CNI (CNI_MODE=$CNI_MODE)?" >&2
  exit 1
fi

mkdir -p _output/bin _output/bench
go -C hack/tools build -o "$PWD/_output/bin/multinet-bench" ./bench
# Deployed multinetd (cluster-up's default): its PID from its pod's container
# (containerd's init.pid), its ServiceAccount as the API user, and netns
# published in the runtime's netns dir, which the container sees.
deployed=()
# shellcheck source=hack/lib/cluster.sh
. hack/lib/cluster.sh
if pid=$(deployed_pid multinetd); then
  echo "$pid" >_output/bench/multinetd.pid
  deployed=(-daemon-pid-file _output/bench/multinetd.pid -daemon-user system:serviceaccount:multinet-system:multinetd
    -netns-publish-dir "$CONTAINERD_NETNS_DIR")
fi
# The dated report: docs/bench/<date>-<commit>.md with its pictures, and the
# latest-run block of docs/bench.md (BENCH_REPORT_DIR= for none, or another
# directory, whose report docs/bench.md does not link; BENCH_PAGE= leaves
# docs/bench.md alone).
report_dir=${BENCH_REPORT_DIR-docs/bench}
# docs/bench.md links only reports under docs/bench.
default_page=
if [[ $report_dir == docs/bench ]]; then default_page=docs/bench.md; fi
page=${BENCH_PAGE-$default_page}
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git status --porcelain --untracked-files=no -- . ':!docs/bench' ':!docs/bench.md' 2>/dev/null) ]]; then
  commit+=-dirty
fi
command="hack/bench.sh"
if [[ -n ${MULTUS_BIN_DIR:-} ]]; then command="MULTUS_BIN_DIR=$MULTUS_BIN_DIR $command"; fi
for arg in "$@"; do
  if [[ $arg =~ ^[A-Za-z0-9_.,/=:+-]+$ ]]; then command+=" $arg"; else command+=$(printf ' %q' "$arg"); fi
done
report=(-commit "$commit" -command "$command" -report-dir "$report_dir")
if [[ -n $report_dir && -n $page ]]; then report+=(-page "$page"); fi
if [[ $(id -u) -ne 0 ]]; then
  exec sudo --preserve-env _output/bin/multinet-bench "${deployed[@]}" "${report[@]}" "$@"
fi
exec _output/bin/multinet-bench "${deployed[@]}" "${report[@]}" "$@"
