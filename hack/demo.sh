#!/usr/bin/env bash
# demo.sh (make demo): the main job. Brings the local cluster up with
# multinet deployed as users install it (make images + kubectl apply -k
# deploy/overlays/local: the multinetd and device plugin DaemonSets, the
# webhook Deployment; default network: bridge + host-local), applies
# examples/ (NetworkAttachmentDefinitions for a bridge, a bridge with static
# addresses, a macvlan on a host link this script creates, and a network in
# "default", the global namespace of namespace isolation; a Deployment whose
# pod selects them; a vhost-user device network and a pod using it), waits
# for the pods and prints their network-status (the device pod's with its
# device-info) and `ip addr`.
# The cluster stays up; make cluster-down stops it and removes everything.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=demo

MULTINET_CNI=multinet "$MULTINET_ROOT/hack/cluster-up.sh"
load_env
[[ ${CNI_MODE:-} == multinet ]] ||
  die "the running cluster uses the plain bridge CNI (CNI_MODE=$CNI_MODE); run make cluster-down first"

# The macvlan network's parent link (no dummy driver here: a veth pair).
if ! ip link show mnd-uplink >/dev/null 2>&1; then
  ip link add mnd-uplink type veth peer name mnd-uplink-p
  ip link set mnd-uplink up
  ip link set mnd-uplink-p up
fi

echo "=== multinet, as deployed by kubectl apply -k deploy/overlays/local (namespace multinet-system)"
kc -n multinet-system get daemonsets,deployments,pods -o wide 2>/dev/null ||
  echo "(not deployed: MULTINET_DEPLOY=${MULTINET_DEPLOY}; multinetd runs as a host process)"
echo

# host-local's data dir goes under the cluster's state, not the host's /var/lib/cni.
manifests=$(for f in "$MULTINET_ROOT"/examples/*.yaml; do
  sed "s#/var/lib/cni/networks#$CNI_IPAM_DIR#g; s#localhost/multinet/busybox:v1#$TEST_IMAGE#g" "$f"
  echo "---"
done)
# Retried: multinet-webhook denies a pod whose NAD its informer has not seen
# yet, and the NADs are created by the same apply a moment earlier.
for attempt in 1 2 3; do
  kc apply -f - >/dev/null <<<"$manifests" && break
  ((attempt < 3)) || die "kubectl apply of examples/ failed"
  sleep 2
done
log "applied examples/: $(kc get net-attach-def -A --no-headers | wc -l) NetworkAttachmentDefinitions, Deployment multinet-demo/multinet-demo"

kc -n multinet-demo rollout status deployment/multinet-demo --timeout=120s >&2

status_key='k8s\.v1\.cni\.cncf\.io/network-status'
pods=$(kc -n multinet-demo get pods -l app=multinet-demo --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}')
total=0
for pod in $pods; do
  echo
  echo "=== pod multinet-demo/$pod: k8s.v1.cni.cncf.io/network-status"
  kc -n multinet-demo get pod "$pod" -o jsonpath="{.metadata.annotations.$status_key}" | jq .
  echo "=== pod multinet-demo/$pod: ip addr (inside the pod)"
  kc -n multinet-demo exec "$pod" -- ip addr
  echo "=== pod multinet-demo/$pod: ip route"
  kc -n multinet-demo exec "$pod" -- ip route
  n=$(kc -n multinet-demo get pod "$pod" -o jsonpath="{.metadata.annotations.$status_key}" | jq 'length')
  total=$((total + n))
  summary_ifaces=$(kc -n multinet-demo get pod "$pod" -o jsonpath="{.metadata.annotations.$status_key}" |
    jq -r 'map("\(.interface)=\(.name)[\((.ips // []) | join(","))]") | join(" ")')
done
# The device-backed pod of examples/30-devices.yaml: the webhook injected its
# multinet.io/vhost request, and vhost0 reports the slot's device-info.
kc -n multinet-demo wait --for=condition=Ready pod/multinet-demo-devices --timeout=120s >/dev/null
echo
echo "=== pod multinet-demo/multinet-demo-devices: resources (injected by multinet-webhook)"
kc -n multinet-demo get pod multinet-demo-devices -o jsonpath='{.spec.containers[0].resources}' | jq -c .
echo "=== pod multinet-demo/multinet-demo-devices: k8s.v1.cni.cncf.io/network-status"
kc -n multinet-demo get pod multinet-demo-devices -o jsonpath="{.metadata.annotations.$status_key}" | jq .
device_info=$(kc -n multinet-demo get pod multinet-demo-devices -o jsonpath="{.metadata.annotations.$status_key}" |
  jq -r 'map(select(."device-info")) | map("\(.interface): \(."device-info")") | join(" ")')

echo
npods=$(wc -w <<<"$pods")
deployed=$(kc -n multinet-system get pods -o jsonpath='{range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}' 2>/dev/null)
echo "multinet components: ${deployed:-host processes (MULTINET_DEPLOY=host)}"
echo "multinet demo: $npods pod(s) running, $total network attachment(s) in all; last pod: $summary_ifaces"
echo "device-backed attachment of multinet-demo/multinet-demo-devices: $device_info"
echo
echo "=== observability (docs/operations.md)"
echo "Grafana dashboard: Grafana > Dashboards > New > Import, upload $MULTINET_ROOT/deploy/observability/dashboard.json (uid multinet-overview), pick a Prometheus data source"
echo "alert rules: $MULTINET_ROOT/deploy/observability/rules.yaml (Prometheus rule_files), $MULTINET_ROOT/deploy/observability/prometheusrule.yaml (PrometheusRule); runbooks: docs/operations.md \"Runbooks\""
echo "scrape: $MULTINET_ROOT/deploy/observability/podmonitors.yaml (PodMonitors); this cluster's multinetd metrics: curl -s http://127.0.0.1:9390/metrics on the node"
echo "The cluster stays up: export KUBECONFIG=$KUBECONFIG; make cluster-down stops it."
