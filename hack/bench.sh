#!/usr/bin/env bash
# bench.sh [flags]: the multinet benchmark on the running local cluster
# (make cluster-up first). Builds hack/tools/bench into _output/bin and runs it
# as root with the cluster's env file; flags go to the bench command
# (_output/bin/multinet-bench -h lists them, e.g. -n 100 -concurrency 10,50).
# Prints a markdown table and writes it to _output/bench/results.md.
# docs/bench.md describes what is measured and how.
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

mkdir -p _output/bin
go build -o _output/bin/multinet-bench ./hack/tools/bench

if [[ $(id -u) -ne 0 ]]; then
  exec sudo --preserve-env _output/bin/multinet-bench "$@"
fi
exec _output/bin/multinet-bench "$@"
