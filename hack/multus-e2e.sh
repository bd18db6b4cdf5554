#!/usr/bin/env bash
# multus-e2e.sh (make test-multus-e2e): the scenarios of Multus's own e2e
# suite (multus-cni e2e/: simple pod, macvlan with static IPs, default route,
# node density, static pod, sub-directory chaining, auxiliary-chain passthru,
# connection limit), re-written for multinet and run against the running
# local cluster (make cluster-up) with multinet deployed. Each scenario
# asserts the behaviour and fails with a message saying what was wrong; a
# summary prints PASS, FAIL or SKIP(reason) per scenario with its time. Exit
# status: 1 when any scenario failed. docs/multus-e2e.md describes every
# scenario and each deliberate difference from the upstream one.
#
#   hack/multus-e2e.sh [SCENARIO...]   default: all, in upstream order
#
# Environment: MULTUS_E2E_NODE (the node the scenarios' pods run on: the
# host by default; on a multi-node cluster any extra node, e.g.
# multinet-node2), MULTUS_E2E_PODS (node density pod count, default 30),
# MULTUS_E2E_TIMEOUT (seconds to wait for pods, default 180),
# MULTUS_E2E_KEEP=1 keeps the namespace for inspection.
#
# Every pod is pinned to that node (nodeSelector kubernetes.io/hostname),
# whose state the checks read: on an extra node through its mount namespace
# (/proc/<holder>/root) and its network namespace (nsenter), as
# hack/lib/nodes.sh makes them. hack/e2e.sh runs this script after the go
# e2e tests, on the same cluster and node (E2E_NODE), so `make test` runs it.
#
# Under CI=true a scenario that skips fails: none of the skips depends on the
# host (the one there is, static-pod without a staticPodPath, is a defect of
# cluster-up); docs/decisions/cluster.md "Verdicts".
#
# Two scenarios change multinetd's configuration (auxiliaryChain,
# maxInFlight: 1) and restart its DaemonSet; the original configuration is
# restored (and the DaemonSet restarted again) before the script exits.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=multus-e2e
load_env
# shellcheck source=hack/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/nodes.sh"

NS=multus-e2e
MANIFESTS=$MULTINET_ROOT/test/multus-e2e
PODS=${MULTUS_E2E_PODS:-30}
TIMEOUT=${MULTUS_E2E_TIMEOUT:-180}
CNI_VERSION=1.0.0
# The macvlan parent: the kernel here has no dummy link type, so a veth
# pair whose peer stays up (cluster-down removes mnd-* links).
MASTER=mnd-mvlan0
AUX_CHAIN=vendor-cni-chain
SYSTEM_NS=multinet-system
STATUS_KEY='k8s\.v1\.cni\.cncf\.io/network-status'
ALL_SCENARIOS=(simple-pod simple-macvlan1 default-route1 node-density static-pod
  subdirectory-chaining subdirectory-chaining-passthru connection-limit)

[[ -f $ENV_FILE ]] || die "no local cluster ($ENV_FILE missing): make cluster-up"
apiserver_ready || die "the local cluster's API server does not answer: make cluster-up"
[[ ${CNI_MODE:-} == multinet ]] || die "the cluster's CNI is not multinet (CNI_MODE=${CNI_MODE:-}); make cluster-down && make cluster-up"
kc -n "$SYSTEM_NS" get daemonset multinetd >/dev/null 2>&1 ||
  die "multinetd is not deployed in $SYSTEM_NS (MULTINET_DEPLOY=manifests, hack/cluster-deployed.sh up)"
command -v jq >/dev/null || die "jq is missing"

# The target node: ROOT is the path of its root directory seen from here
# (empty on the host), on_node runs a command in its namespaces, NODE_POD_CIDR
# and NODE_GATEWAY are its pod subnet and that subnet's gateway, KUBELET_CONFIG
# its kubelet's configuration file.
TARGET=${MULTUS_E2E_NODE:-$NODE_NAME}
if [[ $TARGET == "$NODE_NAME" ]]; then
  ROOT=
  NODE_POD_CIDR=$POD_CIDR
  KUBELET_CONFIG=$CLUSTER_DIR/kubelet-config.yaml
  on_node() { "$@"; }
else
  node_line=$(awk -v n="$TARGET" '$1 == n && $4 != "-"' "$NODES_FILE" 2>/dev/null)
  [[ -n $node_line ]] || die "MULTUS_E2E_NODE=$TARGET is neither the host ($NODE_NAME) nor an extra node of the running cluster ($NODES_FILE)"
  read -r _ _ NODE_POD_CIDR holder _ <<<"$node_line"
  pid_running "$holder" || die "node $TARGET: its holder process $holder is not running"
  ROOT=/proc/$holder/root
  KUBELET_CONFIG=$NODES_DIR/$TARGET/kubelet-config.yaml
  on_node() { node_exec "$TARGET" "$@"; }
fi
[[ $(kc get node "$TARGET" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] ||
  die "node $TARGET is not Ready"
NODE_GATEWAY=$(net=${NODE_POD_CIDR%/*} && echo "${net%.*}.$((${net##*.} + 1))")

# --- helpers -------------------------------------------------------------

# fail MSG: ends the current scenario (a subshell) as failed.
fail() { log "FAIL: $*"; exit 1; }
# skip REASON: ends the current scenario as skipped.
skip() { echo "$*" >"$SKIP_FILE"; exit 77; }

# render FILE [KEY=VALUE...]: the manifest with its @PLACEHOLDERS@ filled.
render() {
  local file=$MANIFESTS/$1; shift
  local args=(-e "s#@NAMESPACE@#$NS#g" -e "s#@IMAGE@#$TEST_IMAGE#g" -e "s#@MASTER@#$MASTER#g"
    -e "s#@CNI_VERSION@#$CNI_VERSION#g" -e "s#@CNI_CONF_DIR@#$CNI_CONF_DIR#g" -e "s#@PODS@#$PODS#g"
    -e "s#@NODE@#$TARGET#g")
  local kv
  for kv in "$@"; do args+=(-e "s#@${kv%%=*}@#${kv#*=}#g"); done
  sed "${args[@]}" "$file"
}

# create FILE [KEY=VALUE...]: applies the rendered manifest. Retried: the
# webhook denies a pod whose NAD its informer has not seen yet.
create() {
  local out
  for _ in 1 2 3 4 5; do
    if out=$(render "$@" | kc apply -f - 2>&1); then return 0; fi
    sleep 2
  done
  fail "kubectl apply of $1: $out"
}

# delete FILE [KEY=VALUE...]: deletes the rendered manifest's objects and waits.
delete() { render "$@" | kc delete --ignore-not-found --wait=true --timeout=120s -f - >/dev/null; }

# ready SELECTOR: waits until the pods of SELECTOR exist and are all Ready.
ready() {
  local deadline=$((SECONDS + TIMEOUT))
  until [[ -n $(kc -n "$NS" get pods -l "$1" -o name 2>/dev/null) ]]; do
    ((SECONDS < deadline)) || fail "no pod matches $1"
    sleep 1
  done
  kc -n "$NS" wait --for=condition=Ready pod -l "$1" --timeout="${TIMEOUT}s" >/dev/null 2>&1 || {
    kc -n "$NS" get pods -l "$1" -o wide >&2
    kc -n "$NS" get events --field-selector type=Warning 2>/dev/null | tail -n 5 >&2
    fail "pods $1 not Ready within ${TIMEOUT}s"
  }
}

pexec() { local pod=$1; shift; kc -n "$NS" exec "$pod" -- "$@"; }

# addrs POD IFNAME: the interface's IPv4 addresses (CIDR), sorted, one a line;
# fails when the interface does not exist.
addrs() {
  local out
  out=$(pexec "$1" ip -o -4 addr show dev "$2" 2>&1) || fail "pod $1 has no interface $2: $out"
  awk '{print $4}' <<<"$out" | sort
}

network_status() { kc -n "$NS" get pod "$1" -o jsonpath="{.metadata.annotations.$STATUS_KEY}"; }

# default_gateways POD: "<gateway> dev <ifname>" of each default route.
default_gateways() { pexec "$1" ip -4 route show default | awk '{print $3, $4, $5}'; }

# Records of multinetd that belong to pods of $NS.
records_of_ns() {
  local dir
  dir=$ROOT$(daemon_config | awk '$1 == "stateDir:" {print $2}')/records
  [[ -d $dir ]] || { echo 0; return; }
  grep -l "\"podNamespace\":\"$NS\"" "$dir"/*.json 2>/dev/null | wc -l
}

# record_of POD: multinetd's attachment record of a pod of $NS.
record_of() {
  local dir
  dir=$ROOT$(daemon_config | awk '$1 == "stateDir:" {print $2}')/records
  grep -l "\"podNamespace\":\"$NS\",\"podName\":\"$1\"" "$dir"/*.json | head -n 1 | xargs cat
}

# host-local leases (files named by IP) of network NAME in its default
# dataDir on the target node.
leases_of() {
  local dir=$ROOT/var/lib/cni/networks/$1
  [[ -d $dir ]] || { echo 0; return; }
  find "$dir" -maxdepth 1 -type f ! -name 'last_reserved_ip*' ! -name lock | wc -l
}

# no_leftovers NET: waits (up to 60 s: the sandboxes' teardown follows the
# pods' removal from the API) until multinetd holds no record of a pod of $NS
# and host-local no lease of NET; fails naming what is left.
no_leftovers() {
  local deadline=$((SECONDS + 60))
  until [[ $(records_of_ns) == 0 && $(leases_of "$1") == 0 ]]; do
    ((SECONDS < deadline)) || fail "pods gone, but $(records_of_ns) multinetd records of $NS and $(leases_of "$1") host-local leases of $1 left after 60s"
    sleep 1
  done
}

# wait_gone SELECTOR: waits until no pod of SELECTOR is left.
wait_gone() {
  local deadline=$((SECONDS + TIMEOUT))
  while [[ -n $(kc -n "$NS" get pods -l "$1" -o name 2>/dev/null) ]]; do
    ((SECONDS < deadline)) || fail "pods $1 still there after ${TIMEOUT}s: $(kc -n "$NS" get pods -l "$1" --no-headers | awk '{print $1, $3}' | head -n 5)"
    sleep 1
  done
}

# --- multinetd's configuration (auxiliaryChain, maxInFlight) -------------

daemon_cm() {
  kc -n "$SYSTEM_NS" get daemonset multinetd \
    -o jsonpath='{.spec.template.spec.volumes[?(@.name=="config")].configMap.name}'
}
daemon_config() { kc -n "$SYSTEM_NS" get configmap "$(daemon_cm)" -o jsonpath='{.data.multinetd\.yaml}'; }

# CONFIG_BACKUP holds multinetd's original configuration while a scenario
# has changed it (empty otherwise); made by the main shell, so that it sees
# the change when a scenario's subshell fails half-way.
restart_daemon() {
  kc -n "$SYSTEM_NS" rollout restart daemonset/multinetd >/dev/null &&
    kc -n "$SYSTEM_NS" rollout status daemonset/multinetd --timeout=180s >/dev/null
}
# set_daemon_config LINE...: appends LINEs to multinetd's configuration file
# (its ConfigMap) and restarts the DaemonSet; restore_daemon_config undoes it.
set_daemon_config() {
  local cm cfg line
  cm=$(daemon_cm)
  [[ -s $CONFIG_BACKUP ]] || daemon_config >"$CONFIG_BACKUP"
  cfg=$(cat "$CONFIG_BACKUP")
  for line in "$@"; do cfg+=$'\n'"$line"; done
  kc -n "$SYSTEM_NS" get configmap "$cm" -o json |
    jq --arg v "$cfg"$'\n' '.data["multinetd.yaml"] = $v' | kc replace -f - >/dev/null
  log "multinetd configuration + $*; restarting the DaemonSet"
  restart_daemon || fail "multinetd did not become Ready with: $*"
}
restore_daemon_config() {
  [[ -s $CONFIG_BACKUP ]] || return 0
  local cm
  cm=$(daemon_cm)
  kc -n "$SYSTEM_NS" get configmap "$cm" -o json |
    jq --rawfile v "$CONFIG_BACKUP" '.data["multinetd.yaml"] = $v' | kc replace -f - >/dev/null || return 1
  : >"$CONFIG_BACKUP"
  log "multinetd configuration restored; restarting the DaemonSet"
  restart_daemon || { log "ERROR: multinetd did not become Ready after the restore"; return 1; }
}

# --- scenarios -------------------------------------------------------------

# simple pod: a pod without a selection becomes Ready, on the default network only.
scenario_simple-pod() {
  create simple-pod.yaml
  ready app=simple
  local st
  st=$(network_status plain-worker)
  [[ $(jq 'length' <<<"$st") == 1 && $(jq -r '.[0].default' <<<"$st") == true && $(jq -r '.[0].interface' <<<"$st") == eth0 ]] ||
    fail "network-status of plain-worker is not the default network alone on eth0: $st"
  addrs plain-worker eth0 | grep -q "^${NODE_POD_CIDR%.*}\." || fail "eth0 of plain-worker has no address in $NODE_POD_CIDR (node $TARGET)"
  delete simple-pod.yaml
}

# macvlan with static IPs: net1 exists and holds exactly the requested
# address, network-status says so, and the two pods reach each other on it.
scenario_simple-macvlan1() {
  create simple-macvlan1.yaml
  ready app=macvlan
  local pod want got st
  for pod in mvlan-a:10.1.1.11/24 mvlan-b:10.1.1.12/24; do
    want=${pod#*:} pod=${pod%%:*}
    got=$(addrs "$pod" net1 | paste -sd' ')
    [[ $got == "$want" ]] || fail "net1 of $pod has [$got], want exactly [$want]"
    st=$(network_status "$pod")
    [[ $(jq -r '.[] | select(.interface == "net1") | "\(.name) \(.ips | join(","))"' <<<"$st") == "$NS/mvlan-static ${want%/*}" ]] ||
      fail "network-status of $pod does not report net1 on $NS/mvlan-static with ${want%/*}: $st"
  done
  pexec mvlan-a ping -c 1 -W 3 10.1.1.12 >/dev/null || fail "mvlan-a cannot reach mvlan-b (10.1.1.12) over net1"
  delete simple-macvlan1.yaml
}

# default route: the pod that asks for it routes by default via 10.1.1.254 on
# net1 only; the other keeps the default network's gateway on eth0. The
# upstream network as written (no "ips" capability) must fail (§4.1.2.1.3.2).
scenario_default-route1() {
  create default-route1.yaml
  ready app=default-route1
  local got
  got=$(addrs route-via-net1 net1 | paste -sd' ')
  [[ $got == 10.1.1.21/24 ]] || fail "net1 of route-via-net1 has [$got], want exactly [10.1.1.21/24]"
  got=$(addrs route-via-eth0 net1 | paste -sd' ')
  [[ $got == 10.1.1.22/24 ]] || fail "net1 of route-via-eth0 has [$got], want exactly [10.1.1.22/24]"
  got=$(default_gateways route-via-net1 | paste -sd';')
  [[ $got == "10.1.1.254 dev net1" ]] || fail "default routes of route-via-net1: [$got], want [10.1.1.254 dev net1] only (§4.1.2.1.9)"
  got=$(default_gateways route-via-eth0 | paste -sd';')
  [[ $got == "$NODE_GATEWAY dev eth0" ]] || fail "default routes of route-via-eth0: [$got], want [$NODE_GATEWAY dev eth0]"
  got=$(network_status route-via-net1 | jq -c '[.[] | select(.interface == "net1") | .dns, ."default-route"]')
  log "network-status of route-via-net1, net1's dns and default-route: $got"
  delete default-route1.yaml

  # As written upstream: ips requested, capability not declared. The
  # refusal (webhook) or the Warning Event (multinetd) must name the NAD,
  # the capability and the spec section: one rule package writes both.
  local out msg="" deadline=$((SECONDS + 60))
  local want='no plugin of CNI config "mvlan-gw-noips" declares "capabilities": {"ips": true} (spec §4.1.2.1.3.2)'
  if ! out=$(render default-route1-no-ips-capability.yaml | kc apply -f - 2>&1); then
    grep -qF "$want" <<<"$out" || fail "the pod was refused, but not with [$want]: $out"
    msg="refused at admission: $out"
  else
    while [[ -z $msg ]]; do
      ((SECONDS < deadline)) || fail "route-noips: no failure naming the ips capability within 60s (§4.1.2.1.3.2 requires the attachment to fail)"
      [[ $(kc -n "$NS" get pod route-noips -o jsonpath='{.status.phase}') != Running ]] ||
        fail "route-noips is Running although its network declares no ips capability"
      msg=$(kc -n "$NS" get events --field-selector involvedObject.name=route-noips,type=Warning \
        -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -m1 -F "$want" || true)
      sleep 1
    done
  fi
  log "as written upstream, the pod fails as §4.1.2.1.3.2 requires: ${msg:0:200}"
  delete default-route1-no-ips-capability.yaml
}

# node density: PODS pods each with a host-local macvlan network, all Ready
# with distinct addresses, each reachable over net1; after deletion no
# record, lease or pod is left.
scenario_node-density() {
  local net=mme-density-macvlan start pods ips n pod ip from got
  [[ $(leases_of $net) == 0 ]] || fail "$net has leases on $TARGET before the test: $(ls "$ROOT/var/lib/cni/networks/$net")"
  start=$SECONDS
  create node-density.yaml
  ready app=density
  log "$PODS pods Ready in $((SECONDS - start))s"
  pods=$(kc -n "$NS" get pods -l app=density -o jsonpath='{.items[*].metadata.name}')
  n=$(wc -w <<<"$pods")
  ((n == PODS)) || fail "$n density pods, want $PODS"
  # "<pod> <net1 address>" per pod, from network-status.
  ips=$(for pod in $pods; do network_status "$pod" | jq -r --arg p "$pod" '.[] | select(.interface == "net1") | "\($p) \(.ips[0])"'; done)
  [[ $(grep -c ' [0-9]' <<<"$ips") == "$PODS" ]] || fail "not every pod reports a net1 address in network-status: $ips"
  [[ $(awk '{print $2}' <<<"$ips" | sort -u | grep -c .) == "$PODS" ]] || fail "duplicate net1 addresses: $(awk '{print $2}' <<<"$ips" | sort | uniq -d)"
  [[ $(leases_of $net) == "$PODS" ]] || fail "host-local holds $(leases_of $net) leases of $net, want $PODS"
  from=${pods%% *}
  while read -r pod ip; do
    # busybox nc (the static busybox's wget crashes in its resolver).
    got=$(pexec "$from" sh -c "printf 'GET /index.html HTTP/1.0\r\n\r\n' | nc -w 3 $ip 8080" </dev/null | tail -n 1 | tr -d '\r')
    [[ $got == "$pod" ]] || fail "$from fetching http://$ip:8080 over net1 got [$got], want $pod's page"
  done <<<"$ips"
  log "every pod answered over net1 from $from"
  start=$SECONDS
  delete node-density.yaml
  wait_gone app=density
  log "$PODS pods deleted in $((SECONDS - start))s"
  no_leftovers $net
  rm -rf "$ROOT/var/lib/cni/networks/$net"
}

# static pod: a manifest in the kubelet's staticPodPath selecting a bridge
# network; its mirror pod becomes Ready with net1 and a network-status
# naming the network; removing the manifest tears it all down.
scenario_static-pod() {
  local dir file pod=static-web-$TARGET net=mme-static-bridge deadline st
  dir=$(awk '$1 == "staticPodPath:" {print $2}' "$KUBELET_CONFIG" 2>/dev/null || true)
  [[ -n $dir ]] || skip "blocked: the kubelet of $TARGET has no staticPodPath ($KUBELET_CONFIG; hack/cluster-up.sh)"
  dir=$ROOT$dir
  [[ -d $dir ]] || fail "the staticPodPath of $TARGET's kubelet, $dir, is not a directory"
  file=$dir/multus-e2e-static-web.yaml
  create static-pod-nad.yaml
  # Written as a hidden file (the kubelet ignores those) and renamed in, in
  # the same directory: the kubelet must never read half a file.
  render static-pod.yaml >"$dir/.multus-e2e-static-web.yaml.tmp"
  mv "$dir/.multus-e2e-static-web.yaml.tmp" "$file"
  deadline=$((SECONDS + TIMEOUT))
  until kc -n "$NS" wait --for=condition=Ready "pod/$pod" --timeout=5s >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { rm -f "$file"; fail "static pod $pod not Ready within ${TIMEOUT}s"; }
    sleep 1
  done
  [[ $(addrs "$pod" net1) == 10.10.* ]] || { rm -f "$file"; fail "net1 of static pod $pod has no address in 10.10.0.0/16"; }
  st=$(network_status "$pod")
  [[ $(jq -r '.[] | select(.interface == "net1") | .name' <<<"$st") == "$NS/bridge-nad" ]] ||
    { rm -f "$file"; fail "network-status of the mirror pod does not list net1 on $NS/bridge-nad: $st"; }
  rm -f "$file"
  local removed=$SECONDS
  deadline=$((SECONDS + TIMEOUT))
  while kc -n "$NS" get pod "$pod" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "mirror pod $pod still there ${TIMEOUT}s after its manifest was removed"
    sleep 1
  done
  no_leftovers $net
  log "static pod torn down (no record, no lease) $((SECONDS - removed))s after its manifest was removed"
  delete static-pod-nad.yaml
  rm -rf "$ROOT/var/lib/cni/networks/$net"
}

# chain_scenario SUBDIR IFNAME_KEY HOST_NETWORK: the DaemonSet writes the
# tuning config into CNI_CONF_DIR/SUBDIR; a pod made before it has
# arp_filter 0 on eth0, one made after it 1; the DaemonSet removes the file.
chain_scenario() {
  local subdir=$1 vars=(SUBDIR="$1" IFNAME_KEY="$2" HOST_NETWORK="$3") got
  create chained-pod.yaml POD=before-chain
  ready "!app"
  got=$(pexec before-chain sysctl -n net.ipv4.conf.eth0.arp_filter) || fail "sysctl in before-chain failed"
  [[ $got == 0 ]] || fail "control pod before-chain has arp_filter $got on eth0 before the chain exists, want 0"
  create subdirectory-chaining.yaml "${vars[@]}"
  kc -n "$NS" rollout status daemonset/chain-writer --timeout="${TIMEOUT}s" >/dev/null ||
    fail "DaemonSet chain-writer not Ready"
  [[ -s $ROOT$CNI_CONF_DIR/$subdir/sysctl-arp-filter.conf ]] || fail "$CNI_CONF_DIR/$subdir/sysctl-arp-filter.conf was not written on $TARGET"
  create chained-pod.yaml POD=sysctl-modified
  kc -n "$NS" wait --for=condition=Ready pod/sysctl-modified --timeout="${TIMEOUT}s" >/dev/null ||
    fail "pod sysctl-modified not Ready"
  got=$(pexec sysctl-modified sysctl -n net.ipv4.conf.eth0.arp_filter) || fail "sysctl in sysctl-modified failed"
  [[ $got == 1 ]] || fail "net.ipv4.conf.eth0.arp_filter of sysctl-modified is $got, want 1 (set by the chained tuning plugin)"
  [[ $(network_status sysctl-modified | jq 'length') == 1 ]] ||
    fail "network-status of sysctl-modified lists more than the default network: $(network_status sysctl-modified)"
  if [[ $subdir == "$AUX_CHAIN" ]]; then
    got=$(record_of sysctl-modified | jq -c '[.attachments[] | {network, ifName, auxiliary}]')
    [[ $got == "[{\"network\":\"$DEFAULT_NETWORK_NAME\",\"ifName\":\"eth0\",\"auxiliary\":null},{\"network\":\"$AUX_CHAIN\",\"ifName\":\"eth0\",\"auxiliary\":true}]" ]] ||
      fail "multinetd's record of sysctl-modified is not [default network, auxiliary chain $AUX_CHAIN]: $got"
  fi
  delete chained-pod.yaml POD=sysctl-modified
  delete chained-pod.yaml POD=before-chain
  delete subdirectory-chaining.yaml "${vars[@]}"
  wait_gone app=chain-writer
  [[ ! -e $ROOT$CNI_CONF_DIR/$subdir/sysctl-arp-filter.conf ]] || fail "the DaemonSet left $CNI_CONF_DIR/$subdir/sysctl-arp-filter.conf on $TARGET"
}

# sub-directory chaining: plugins in <conf dir>/<default network name>/ are
# appended to the default network's conflist.
scenario_subdirectory-chaining() {
  chain_scenario "$DEFAULT_NETWORK_NAME" IFNAME true
}

# auxiliary-chain passthru: multinetd's auxiliaryChain (Multus's
# auxiliaryCNIChainName) runs the plugins of <conf dir>/<chain>/ for every
# pod, as a chain of its own, recorded for DEL.
scenario_subdirectory-chaining-passthru() {
  set_daemon_config "auxiliaryChain: $AUX_CHAIN"
  chain_scenario "$AUX_CHAIN" eth0 false
  restore_daemon_config || fail "multinetd's configuration could not be restored"
}

# connection limit: six pods at once while multinetd runs one CNI operation
# at a time; all Ready, none with a failed sandbox.
scenario_connection-limit() {
  set_daemon_config "maxInFlight: 1"
  local start=$SECONDS failed
  create many-pods.yaml
  ready app=many
  log "6 pods Ready in $((SECONDS - start))s with maxInFlight: 1"
  failed=$(kc -n "$NS" get events --field-selector reason=FailedCreatePodSandBox -o json |
    jq -r '.items[] | select(.involvedObject.name | startswith("many-")) | "\(.involvedObject.name): \(.message)"')
  [[ -z $failed ]] || fail "failed sandboxes (an operation did not wait for its slot): ${failed:0:400}"
  delete many-pods.yaml
  wait_gone app=many
  restore_daemon_config || fail "multinetd's configuration could not be restored"
}

# --- main ------------------------------------------------------------------

cleanup() {
  local rc=$?
  set +e
  restore_daemon_config 2>/dev/null
  if [[ ${MULTUS_E2E_KEEP:-} != 1 ]]; then
    kc delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1
    on_node ip link del "$MASTER" 2>/dev/null
    on_node ip link del mnd-static0 2>/dev/null
  fi
  rm -f "$ROOT$CNI_CONF_DIR/$DEFAULT_NETWORK_NAME/sysctl-arp-filter.conf" "$ROOT$CNI_CONF_DIR/$AUX_CHAIN/sysctl-arp-filter.conf"
  rmdir "$ROOT$CNI_CONF_DIR/$DEFAULT_NETWORK_NAME" "$ROOT$CNI_CONF_DIR/$AUX_CHAIN" 2>/dev/null
  rm -f "$SKIP_FILE" "$CONFIG_BACKUP"
  exit "$rc"
}
SKIP_FILE=$(mktemp)
CONFIG_BACKUP=$(mktemp)
trap cleanup EXIT

scenarios=("$@")
((${#scenarios[@]})) || scenarios=("${ALL_SCENARIOS[@]}")
for s in "${scenarios[@]}"; do
  declare -F "scenario_$s" >/dev/null || die "unknown scenario $s (known: ${ALL_SCENARIOS[*]})"
done

deadline=$((SECONDS + 120))
while [[ $(kc get namespace "$NS" -o jsonpath='{.status.phase}' 2>/dev/null) == Terminating ]]; do
  ((SECONDS < deadline)) || die "namespace $NS is still terminating from an earlier run"
  sleep 1
done
kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
# Multus's scenarios use host-device, macvlan masters and node bridges: the
# harness is the cluster admin and trusts the namespace (docs/nad-trust.md).
kc label namespace "$NS" multinet.io/nad-trust=unrestricted --overwrite >/dev/null
if ! on_node ip link show "$MASTER" >/dev/null 2>&1; then
  on_node ip link add "$MASTER" type veth peer name "$MASTER-p"
  on_node ip link set "$MASTER" up
  on_node ip link set "$MASTER-p" up
fi
log "scenarios on node $TARGET (pod subnet $NODE_POD_CIDR)${CI:+, CI=$CI}"

declare -A result took
failures=0
t_all=$SECONDS
for s in "${scenarios[@]}"; do
  log "=== $s"
  start=$SECONDS
  : >"$SKIP_FILE"
  set +e
  (
    set -e
    "scenario_$s"
  )
  rc=$?
  set -e
  took[$s]=$((SECONDS - start))
  case $rc in
  0) result[$s]=PASS ;;
  77)
    if [[ ${CI:-} == true ]]; then
      # No scenario's skip depends on the host: under CI it is a failure.
      result[$s]="FAIL(skipped under CI=true: $(cat "$SKIP_FILE"))"
      failures=$((failures + 1))
    else
      result[$s]="SKIP($(cat "$SKIP_FILE"))"
    fi
    ;;
  *)
    result[$s]=FAIL
    failures=$((failures + 1))
    # Leave nothing of a failed scenario to the next one.
    kc -n "$NS" delete deployments,daemonsets,pods,configmaps,network-attachment-definitions --all --wait=true --timeout=120s >/dev/null 2>&1 || true
    restore_daemon_config || true
    ;;
  esac
  log "=== $s: ${result[$s]} (${took[$s]}s)"
done

echo
printf '%-32s %-8s %s\n' SCENARIO SECONDS RESULT
for s in "${scenarios[@]}"; do
  printf '%-32s %-8s %s\n' "$s" "${took[$s]}" "${result[$s]}"
done
echo "on node $TARGET, $((SECONDS - t_all))s in all"
((failures == 0)) || die "$failures scenario(s) failed"
