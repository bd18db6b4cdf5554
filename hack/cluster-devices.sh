#!/usr/bin/env bash
# cluster-devices.sh up|down|restart-kubelet: the device half of multinet on the
# local cluster (docs/local-cluster.md "Devices"). Called by
# hack/cluster-cni-multinet.sh after multinetd starts (up) and before it stops
# (down); run it directly to pick up changes without a cluster-down.
#
#   up               creates the host test devices (veth pairs mnv0..N-1 with
#                    peers mnv0p.., mnr0, mnr1 for the DRA driver; the vhost-user slot directory), writes the
#                    device-plugin config, (re)starts multinet-deviceplugin and
#                    multinet-webhook as host-process components (PID files in
#                    PID_DIR, logs in LOG_DIR) and waits until the webhook is
#                    ready and, when the kubelet runs, until the node's
#                    allocatable shows both pools. Writes multinet/devices.env
#                    for the e2e tests.
#   down             stops both, deletes the webhook configurations (their
#                    failurePolicy is Fail), the devices and the directories it
#                    made.
#   restart-kubelet  stops the kubelet (SIGTERM) and starts it again with the
#                    same command line, as a component; waits until it is
#                    healthy and the node Ready (device-plugin re-registration
#                    tests).
#   identity         (re)applies the host-process webhook's identity and its
#                    RBAC (write_webhook_identity): an uninstall that deletes
#                    WEBHOOK_NAMESPACE takes its Role with it (TestUninstall
#                    puts it back, so that the suite can run again on the
#                    same cluster, as make test-layouts runs it).
#
# The binaries come from _output/bin (built by cluster-cni-multinet.sh up).
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=cluster-devices
ENV_FILE=${MULTINET_CLUSTER_ENV:-$ENV_FILE}
load_env

MULTINET_DIR=$CLUSTER_DIR/multinet
BIN_OUT=$MULTINET_ROOT/_output/bin
DEVICES_ENV=$MULTINET_DIR/devices.env
DEVICES_RECORD=$MULTINET_DIR/devices.record # host dirs this script created
DP_CONFIG=$MULTINET_DIR/deviceplugin.yaml
VHOST_DIR=$MULTINET_DIR/vhost
DEVINFO_ROOT=/var/run/k8s.cni.cncf.io/devinfo # pkg/spec/devinfo.DefaultRoot, shared with multinetd

# Pools. The netdev devices are veth pairs (this kernel has no dummy links):
# mnvN is the pool's device, its peer mnvNp stays in the host so that mnvN is
# operationally up (healthy) wherever it is.
NETDEV_RESOURCE=${MULTINET_NETDEV_RESOURCE:-multinet.io/netdev}
NETDEV_COUNT=${MULTINET_NETDEV_COUNT:-4}
# The DRA driver's netdevs (deploy/overlays/local/dra-driver.yaml): veth pairs
# mnr0..N-1, apart from the device plugin's.
DRA_NETDEV_COUNT=2
VHOST_RESOURCE=${MULTINET_VHOST_RESOURCE:-multinet.io/vhost}
VHOST_SLOTS=${MULTINET_VHOST_SLOTS:-4}
VHOST_CONTAINER_PATH=/var/run/vhost-user

# The webhook: TLS on 127.0.0.1 for the API server (url clientConfig), plain
# HTTP probes next to it.
WEBHOOK_NAMESPACE=multinet-system
WEBHOOK_PORT=${MULTINET_WEBHOOK_PORT:-9443}
WEBHOOK_PROBE_ADDRESS=${MULTINET_WEBHOOK_PROBE_ADDRESS:-127.0.0.1:9444}
WEBHOOK_CONFIG_NAME=multinet-webhook
WEBHOOK_KUBECONFIG=$MULTINET_DIR/webhook.kubeconfig


netdev_names() {
  local i
  for ((i = 0; i < NETDEV_COUNT; i++)); do echo "mnv$i"; done
}

# all_netdev_names: the device plugin's and the DRA driver's.
all_netdev_names() {
  local i
  netdev_names
  for ((i = 0; i < DRA_NETDEV_COUNT; i++)); do echo "mnr$i"; done
}

# ---- devices -------------------------------------------------------------------

# make_devices creates the missing veth pairs (both ends up) and the vhost
# slot directory. A pair whose mnvN is missing while its peer exists is in a
# pod (multinet-netdev moved it): left alone, it comes back on the pod's DEL.
make_devices() {
  local n
  for n in $(all_netdev_names); do
    if ! ip link show "$n" >/dev/null 2>&1 && ! ip link show "${n}p" >/dev/null 2>&1; then
      ip link add "$n" type veth peer name "${n}p"
    fi
    ip link show "${n}p" >/dev/null 2>&1 && ip link set "${n}p" up
    ip link show "$n" >/dev/null 2>&1 && ip link set "$n" up
  done
  mkdir -p "$VHOST_DIR"
}

remove_devices() {
  local n
  for n in $(all_netdev_names); do
    # Deleting either end of a veth pair deletes both.
    ip link delete "$n" 2>/dev/null || ip link delete "${n}p" 2>/dev/null || true
  done
  rm -rf "$VHOST_DIR"
}

# make_host_dir DIR: mkdir -p, remembering each level this script created so
# that down removes exactly those (when empty).
make_host_dir() {
  local d=$1 missing=()
  while [[ ! -e $d ]]; do missing+=("$d"); d=$(dirname "$d"); done
  mkdir -p "$1"
  local i
  for ((i = 0; i < ${#missing[@]}; i++)); do echo "${missing[i]}" >>"$DEVICES_RECORD"; done
}

remove_host_dirs() {
  [[ -f $DEVICES_RECORD ]] || return 0
  local d
  # The plugin's and multinetd's subdirectories (their files are gone once
  # both stopped and every pod is deleted), then what the record lists,
  # deepest first (each dir comes before its parent).
  rmdir "$DEVINFO_ROOT/dp" "$DEVINFO_ROOT/cni" 2>/dev/null || true
  while read -r d; do
    [[ -n $d && -d $d ]] && rmdir "$d" 2>/dev/null || true
  done <"$DEVICES_RECORD"
  rm -f "$DEVICES_RECORD"
}

# ---- device plugin ---------------------------------------------------------------

write_dp_config() {
  local names
  names=$(netdev_names | paste -sd, -)
  cat >"$DP_CONFIG" <<YAML
# multinet-deviceplugin on the local cluster (hack/cluster-devices.sh); format: docs/deviceplugin.md
pools:
- resourceName: $NETDEV_RESOURCE
  netdev:
    names: [${names//,/, }]
- resourceName: $VHOST_RESOURCE
  vhostUser:
    dir: $VHOST_DIR
    slots: $VHOST_SLOTS
    mode: client
    containerPath: $VHOST_CONTAINER_PATH
YAML
}

allocatable() { # allocatable RESOURCE: the node's allocatable count (0 when absent)
  kc get node "$NODE_NAME" -o json | jq -r --arg r "$1" '.status.allocatable[$r] // "0"'
}

pools_advertised() {
  [[ $(allocatable "$NETDEV_RESOURCE") == "$NETDEV_COUNT" ]] && [[ $(allocatable "$VHOST_RESOURCE") == "$VHOST_SLOTS" ]]
}

start_deviceplugin() {
  component_alive multinet-deviceplugin && stop_component multinet-deviceplugin
  start_component multinet-deviceplugin "$BIN_OUT/multinet-deviceplugin" \
    --config "$DP_CONFIG" --device-plugins-dir "$DEVICE_PLUGINS_DIR" --devinfo-dir "$DEVINFO_ROOT" -v=2
  if component_alive kubelet; then
    wait_until "node $NODE_NAME allocatable: $NETDEV_COUNT $NETDEV_RESOURCE, $VHOST_SLOTS $VHOST_RESOURCE" 60 \
      "multinet-deviceplugin kubelet" pools_advertised
    log "multinet-deviceplugin runs (pid $(component_pid multinet-deviceplugin)); node allocatable shows both pools"
  else
    # During cluster-up the kubelet starts after this hook; the plugin
    # registers once kubelet.sock appears.
    sleep 1
    component_alive multinet-deviceplugin || { explain_failure multinet-deviceplugin; die "multinet-deviceplugin exited"; }
    log "multinet-deviceplugin runs (pid $(component_pid multinet-deviceplugin)); it registers when the kubelet starts"
  fi
}

# ---- webhook ------------------------------------------------------------------------

# write_webhook_identity gives the webhook its own client certificate (user
# system:multinet-webhook) bound to the RBAC of docs/webhook.md, so that a
# missing permission shows up here and not only in a real deployment, and
# creates its empty certificate Secret (it may not create Secrets).
write_webhook_identity() {
  client_identity webhook "/CN=system:multinet-webhook" "$WEBHOOK_KUBECONFIG"
  kc get namespace "$WEBHOOK_NAMESPACE" >/dev/null 2>&1 || kc create namespace "$WEBHOOK_NAMESPACE" >/dev/null
  kc apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "multinet:webhook-host"}
rules:
- {apiGroups: [k8s.cni.cncf.io], resources: [network-attachment-definitions], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods], verbs: [list]}
- {apiGroups: [resource.k8s.io], resources: [resourceslices, deviceclasses], verbs: [get, list, watch]}
- {apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations], verbs: [get, create, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "multinet:webhook-host"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "multinet:webhook-host"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:multinet-webhook"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: "multinet:webhook-host", namespace: $WEBHOOK_NAMESPACE}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "multinet:webhook-host", namespace: $WEBHOOK_NAMESPACE}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "multinet:webhook-host"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:multinet-webhook"}
YAML
  # Its certificate Secret, empty, as deploy/ ships it: the webhook fills it
  # and may create no Secret (docs/security.md "Webhook identity").
  kc -n "$WEBHOOK_NAMESPACE" get secret multinet-webhook-certs >/dev/null 2>&1 ||
    kc -n "$WEBHOOK_NAMESPACE" create secret generic multinet-webhook-certs >/dev/null
}

webhook_ready() { curl -fsS "http://$WEBHOOK_PROBE_ADDRESS/readyz" >/dev/null; }

# The API server has stored the caBundle the webhook published (it calls the
# webhook only once it trusts its certificate).
webhook_registered() {
  [[ -n $(kc get mutatingwebhookconfiguration "$WEBHOOK_CONFIG_NAME" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null) ]] &&
    [[ -n $(kc get validatingwebhookconfiguration "$WEBHOOK_CONFIG_NAME" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null) ]]
}

# start_webhook runs the webhook as a host process. The API server reaches
# it through a url clientConfig (https://127.0.0.1:PORT): there is no
# kube-proxy and the API server does not route to Services here
# (docs/local-cluster.md "Devices").
start_webhook() {
  component_alive multinet-webhook && stop_component multinet-webhook
  start_component multinet-webhook "$BIN_OUT/multinet-webhook" \
    --kubeconfig "$WEBHOOK_KUBECONFIG" \
    --bind-address 127.0.0.1 --port "$WEBHOOK_PORT" --url "https://127.0.0.1:$WEBHOOK_PORT" \
    --probe-bind-address "$WEBHOOK_PROBE_ADDRESS" \
    --namespace "$WEBHOOK_NAMESPACE" \
    --mutating-webhook-configuration "$WEBHOOK_CONFIG_NAME" --validating-webhook-configuration "$WEBHOOK_CONFIG_NAME" \
    --namespace-isolation --global-namespaces=default \
    --manage-webhook-configurations -v=2
  wait_until "multinet-webhook http://$WEBHOOK_PROBE_ADDRESS/readyz" 60 multinet-webhook webhook_ready
  wait_until "webhook configurations $WEBHOOK_CONFIG_NAME with a caBundle" 30 multinet-webhook webhook_registered
  log "multinet-webhook runs (pid $(component_pid multinet-webhook)) at https://127.0.0.1:$WEBHOOK_PORT"
}

delete_webhook_configurations() {
  apiserver_ready || return 0
  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration "$WEBHOOK_CONFIG_NAME" \
    --ignore-not-found >/dev/null 2>&1 || log "WARNING: could not delete the webhook configurations $WEBHOOK_CONFIG_NAME"
}

# ---- shared -----------------------------------------------------------------------------

stop_component() {
  local pid
  if pid=$(component_pid "$1"); then
    stop_pid "$pid" "$1" 15 || log "WARNING: $1 (pid $pid) did not stop"
  fi
  rm -f "$PID_DIR/$1.pid" "$PID_DIR/$1.exe"
}

write_devices_env() {
  cat >"$DEVICES_ENV.tmp" <<EOF
# Written by hack/cluster-devices.sh up; read by test/e2e (devices_*_test.go).
export NETDEV_RESOURCE=$NETDEV_RESOURCE
export NETDEV_DEVICES=$(netdev_names | paste -sd, -)
export VHOST_RESOURCE=$VHOST_RESOURCE
export VHOST_SLOTS=$VHOST_SLOTS
export VHOST_DIR=$VHOST_DIR
export VHOST_CONTAINER_PATH=$VHOST_CONTAINER_PATH
export DEVINFO_ROOT=$DEVINFO_ROOT
export DEVICEPLUGIN_CONFIG=$DP_CONFIG
export WEBHOOK_URL=https://127.0.0.1:$WEBHOOK_PORT
export WEBHOOK_PROBE_URL=http://$WEBHOOK_PROBE_ADDRESS
export WEBHOOK_NAMESPACE=$WEBHOOK_NAMESPACE
export WEBHOOK_CONFIG_NAME=$WEBHOOK_CONFIG_NAME
export WEBHOOK_KUBECONFIG=$WEBHOOK_KUBECONFIG
EOF
  mv -f "$DEVICES_ENV.tmp" "$DEVICES_ENV"
}

kubelet_healthy() { curl -fsS "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null; }

# restart_kubelet re-runs the kubelet with the command line it runs with now
# (cluster-up's start_kubelet wrote it), so that its flags and config stay
# the same.
restart_kubelet() {
  local pid
  pid=$(component_pid kubelet) || die "the kubelet is not running"
  local -a cmd
  mapfile -d '' -t cmd <"/proc/$pid/cmdline"
  ((${#cmd[@]} > 0)) || die "cannot read the kubelet's command line"
  stop_pid "$pid" kubelet 20 || die "the kubelet (pid $pid) did not stop"
  start_component kubelet "${cmd[@]}"
  wait_until "kubelet healthz" 60 kubelet kubelet_healthy
  wait_until "node $NODE_NAME Ready" 60 kubelet node_ready
  log "kubelet restarted (pid $(component_pid kubelet))"
}

case ${1:-} in
up)
  mkdir -p "$MULTINET_DIR"
  # The kubelet creates its device-plugins dir, but only when it starts: the
  # plugin must watch it before (cluster-up records it as a host dir).
  mkdir -p "$DEVICE_PLUGINS_DIR"
  make_host_dir "$DEVINFO_ROOT"
  make_devices
  write_dp_config
  write_webhook_identity
  write_devices_env
  start_deviceplugin
  start_webhook
  ;;
down)
  stop_component multinet-webhook
  delete_webhook_configurations
  stop_component multinet-deviceplugin
  remove_devices
  rm -f "$DEVICES_ENV"
  remove_host_dirs
  ;;
restart-kubelet)
  restart_kubelet
  ;;
identity)
  write_webhook_identity
  ;;
*)
  echo "usage: $0 up|down|restart-kubelet|identity" >&2
  exit 2
  ;;
esac
