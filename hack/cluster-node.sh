#!/usr/bin/env bash
# cluster-node.sh kill|start|restart-kubelet NODE: one extra node of a
# multi-node local cluster (make cluster-up NODES=N; hack/lib/nodes.sh), for
# the tests of a node that dies (e2e TestMultiNodeNodeKilled) and the e2e
# suite run on an extra node (E2E_NODE).
#
#   kill NODE             SIGKILLs the node's kubelet and containerd and every
#                         process in its kubelet's cgroups (its pods'
#                         containers and their shims): the node is dead, as
#                         after a power cut. Its namespaces, kube-proxy and its
#                         pods' network namespaces stay.
#   start NODE            starts its containerd and kubelet again (the same
#                         configuration) and waits until the node is Ready.
#   restart-kubelet NODE  stops the node's kubelet (SIGTERM), starts it again
#                         with the same configuration and waits until its
#                         healthz answers and the node is Ready (what
#                         hack/cluster-devices.sh restart-kubelet does on the
#                         host: device-plugin and DRA re-registration tests).
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/nodes.sh"
LOG_PREFIX=cluster-node
load_env

name=${2:-}
[[ -n $name ]] || { echo "usage: $0 kill|start|restart-kubelet NODE" >&2; exit 2; }
line=$(awk -v n="$name" '$1 == n && $4 != "-"' "$NODES_FILE" 2>/dev/null)
[[ -n $line ]] || die "$name is not an extra node of the running cluster ($NODES_FILE)"
read -r _ ip _ _ _ <<<"$line"

kill_node() {
  local c pid n=0
  for c in kubelet containerd; do
    pid=$(component_pid "$name-$c") && kill -KILL "$pid" && n=$((n + 1))
  done
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCKET" 2>/dev/null); do
    # Only this node's shims: they live in its mount namespace.
    [[ $(stat -L -c %i "/proc/$pid/ns/mnt" 2>/dev/null) == $(stat -L -c %i "/proc/$(component_pid "$name-holder")/ns/mnt") ]] &&
      kill -KILL "$pid" && n=$((n + 1))
  done
  for pid in $(find /sys/fs/cgroup/*/"$NODE_CGROUP_PREFIX$name" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
    kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
  done
  log "node $name killed ($n processes)"
}

# node_kubelet_healthy: the node's kubelet answers healthz (its own
# 127.0.0.1, in the node's network namespace).
node_kubelet_healthy() {
  node_exec "$name" curl -fsS "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null 2>&1
}

restart_kubelet() {
  local pid
  pid=$(component_pid "$name-kubelet") || die "the kubelet of $name is not running"
  stop_pid "$pid" "$name-kubelet" 20 || die "the kubelet of $name (pid $pid) did not stop"
  node_start_kubelet "$name" "$ip"
  wait_until "node $name: kubelet healthz" 60 "$name-kubelet" node_kubelet_healthy
  wait_until "node $name Ready" 60 "$name-kubelet" node_ready_named "$name"
  log "kubelet of $name restarted (pid $(component_pid "$name-kubelet"))"
}

case $1 in
kill) kill_node ;;
restart-kubelet) restart_kubelet ;;
start)
  component_alive "$name-containerd" || node_start_containerd "$name"
  component_alive "$name-kubelet" || node_start_kubelet "$name" "$ip"
  wait_until "node $name Ready" 180 "$name-containerd $name-kubelet" node_ready_named "$name"
  log "node $name runs again"
  ;;
*)
  echo "usage: $0 kill|start|restart-kubelet NODE" >&2
  exit 2
  ;;
esac
