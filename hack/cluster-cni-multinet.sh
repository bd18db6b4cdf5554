#!/usr/bin/env bash
# cluster-cni-multinet.sh up|down|restart: makes multinet the local cluster's
# CNI (MULTINET_CNI=multinet, called by hack/cluster-up.sh before the kubelet
# starts and by hack/cluster-down.sh after the pods are gone).
#
#   up       builds multinetd and multinet-shim into _output/bin, installs the
#            shim into the cluster's CNI bin dir (copy + rename: a running
#            shim is never "text file busy"), writes the daemon config and
#            starts multinetd as a host process (PID file in the cluster's
#            pids dir, log in logs/multinetd.log), then waits until multinetd
#            has written 00-multinet.conflist (multi-net spec §6.1 readiness).
#   down     stops multinetd (SIGTERM; the CNI config file stays, as on a node).
#   restart  stops and starts multinetd (tests: a daemon restart with pods).
#
# The default network is the cluster's bridge conflist, kept out of the
# runtime's conf dir in $DEFAULT_NETWORK_CONF.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=cni-multinet
ENV_FILE=${MULTINET_CLUSTER_ENV:-$ENV_FILE}
load_env

MULTINET_DIR=$CLUSTER_DIR/multinet
DAEMON_CONFIG=$MULTINET_DIR/multinetd.yaml
SOCKET=$MULTINET_DIR/run/multinetd.sock
BIN_OUT=$MULTINET_ROOT/_output/bin
METRICS_ADDRESS=${MULTINETD_METRICS_ADDRESS:-127.0.0.1:9390}

build() {
  # Every component the local cluster runs (multinetd, the shim, the netdev
  # plugin, the device plugin, the webhook) and the kubectl plugin; a build
  # failure stops cluster-up here with the compiler's message.
  mkdir -p "$BIN_OUT"
  # -tags grpcnotrace as hack/images.sh (docs/bench.md "Binary size").
  (cd "$MULTINET_ROOT" && CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags '-s -w' -o "$BIN_OUT/" \
    ./cmd/multinetd ./cmd/multinet-shim ./cmd/multinet-netdev ./cmd/multinet-ipam ./cmd/multinet-deviceplugin ./cmd/multinet-webhook ./cmd/kubectl-multinet)
}

install_plugin() { # install_plugin NAME: atomic copy into the CNI bin dir
  local src=$BIN_OUT/$1 dst=$CNI_BIN_DIR/$1
  [[ -x $src ]] || return 0
  cp -f "$src" "$dst.tmp.$$"
  mv -f "$dst.tmp.$$" "$dst"
}

write_config() {
  mkdir -p "$MULTINET_DIR/state" "$(dirname "$SOCKET")"
  cat >"$DAEMON_CONFIG" <<YAML
# multinetd on the local cluster (hack/cluster-cni-multinet.sh); fields: docs/multinetd.md
nodeName: $NODE_NAME
kubeconfig: $MULTINET_DIR/multinetd.kubeconfig
socketPath: $SOCKET
cniConfDir: $CNI_CONF_DIR
cniBinDirs: [$CNI_BIN_DIR]
defaultNetwork:
  file: $DEFAULT_NETWORK_CONF
stateDir: $MULTINET_DIR/state
podResourcesSocket: $PODRESOURCES_SOCKET
# records of sandboxes containerd removed without a DEL reaching multinetd
# are reaped through its CRI socket (docs/multinetd.md "Reaping")
runtimeEndpoint: unix://$CONTAINERD_SOCKET
metricsAddress: $METRICS_ADDRESS
# Namespace isolation (spec §7.4) as deploy/ ships it, with the webhook's
# --global-namespaces of hack/cluster-devices.sh (docs/install.md).
namespaceIsolation: true
globalNamespaces: [default]
# multinet-ipam's per-namespace limit is 2 in TestTenantIPAMPool's namespace
# (deploy/overlays/local/multinetd.yaml says the same)
ipamNamespaceMaxAllocations: {multinet-e2e-ipam-quota: 2}
YAML
}

# multinetd gets its own identity (user multinetd, group multinet:nodes),
# bound to the least-privilege ClusterRole of deploy/, so that the API
# server's audit and metrics tell its requests apart.
write_identity() {
  client_identity multinetd "/O=multinet:nodes/CN=system:multinetd:$NODE_NAME" "$MULTINET_DIR/multinetd.kubeconfig"
  kc apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "multinet:multinetd-host"}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods/status], verbs: [patch]}
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
- {apiGroups: [k8s.cni.cncf.io], resources: [network-attachment-definitions, ipamclaims], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "multinet:multinetd-host"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "multinet:multinetd-host"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "multinet:nodes"}
YAML
}


conf_written() { [[ -s $CNI_CONF_DIR/00-multinet.conflist ]]; }

start_daemon() {
  start_component multinetd "$BIN_OUT/multinetd" --config "$DAEMON_CONFIG" -v="${MULTINETD_VERBOSITY:-2}"
  wait_until "multinetd writes $CNI_CONF_DIR/00-multinet.conflist" 60 multinetd conf_written
  log "multinetd runs (pid $(component_pid multinetd)); CNI config: $CNI_CONF_DIR/00-multinet.conflist"
}

stop_daemon() {
  local pid
  if pid=$(component_pid multinetd); then
    stop_pid "$pid" multinetd 35
  fi
  rm -f "$PID_DIR/multinetd.pid" "$PID_DIR/multinetd.exe"
}

case ${1:-} in
up)
  build
  install_plugin multinet-shim
  install_plugin multinet-netdev
  install_plugin multinet-ipam
  write_identity
  write_config
  component_alive multinetd && stop_daemon
  start_daemon
  "$MULTINET_ROOT/hack/cluster-devices.sh" up # device plugin, webhook, test devices
  ;;
down)
  "$MULTINET_ROOT/hack/cluster-devices.sh" down || log "WARNING: hack/cluster-devices.sh down failed"
  stop_daemon
  ;;
restart)
  stop_daemon
  start_daemon
  ;;
*)
  echo "usage: $0 up|down|restart" >&2
  exit 2
  ;;
esac
