#!/usr/bin/env bash
# cluster-up.sh brings up a real single-node Kubernetes cluster on this
# machine, from nothing: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd + runc, kubelet and the reference CNI plugins,
# all state under _output/cluster/. See docs/local-cluster.md.
#
# Idempotent: when the cluster is already up and healthy it says so and exits
# 0; leftovers of a crashed run are cleaned up (hack/cluster-down.sh) first.
# It returns once the node is Ready and a busybox pod got an IP, or exits
# non-zero with the log lines that say which component failed and why.
#
# Environment:
#   MULTINET_CNI=bridge|multinet  default network: the mnbr0 bridge conflist
#                                 (default), or multinetd through
#                                 $MULTINET_CNI_HOOK (hack/cluster-cni-multinet.sh)
#   MULTINET_DEPLOY=manifests|helm|host  with MULTINET_CNI=multinet: once the node
#                                 is Ready, replace the host-process
#                                 bootstrap (multinetd, webhook, device
#                                 plugin) with the deployed components, as
#                                 users install them: make images and
#                                 kubectl apply -k deploy/overlays/local
#                                 (hack/cluster-deployed.sh up; default), the
#                                 same from the Helm chart deploy/helm/multinet
#                                 (helm), or keep the host processes (host)
#   DEFAULT_NETWORK=containerd|kindnet  the default network's conflist:
#                                 containerd's example (default) or kind's
#                                 kindnet (see default_network_conflist)
#   NODES=N                       nodes (default 1: the host alone). N > 1
#                                 adds multinet-node2..N, each in its own
#                                 network, mount and UTS namespaces with its
#                                 own containerd, kubelet and kube-proxy
#                                 (hack/lib/nodes.sh; docs/local-cluster.md
#                                 "Several nodes")
#   NODE_LAYOUTS="plain k3s nixos"  each node's CNI layout, node 1 first
#                                 (plain, k3s or nixos; the default with
#                                 NODES=3; hack/lib/nodes.sh,
#                                 docs/local-cluster.md "Node layouts")
#   KUBELET_MAX_PODS=110           the kubelet's maxPods (the policy bench's
#                                 300 pods: KUBELET_MAX_PODS=330 with
#                                 POD_CIDR=10.244.0.0/22; docs/bench.md)
#   K8S_VERSION, CNI_PLUGINS_VERSION, POD_CIDR, KUBECTL, MULTINET_CACHE_DIR
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/coredns.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/coredns.sh"
# shellcheck source=hack/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/nodes.sh"
LOG_PREFIX=cluster-up

NODE_NAME=$(node_name)

preflight() {
  [[ $(id -u) == 0 ]] || die "must run as root (it starts a kubelet and a container runtime)"
  [[ $(uname -s) == Linux ]] || die "Linux only"
  [[ $MULTINET_ROOT != *[[:space:]]* ]] || die "the repository path must not contain white space: $MULTINET_ROOT"
  command -v go >/dev/null || die "go is not on PATH (needed to build Kubernetes and the CNI plugins)"
  case $MULTINET_CNI in
  bridge) ;;
  multinet) [[ -x $MULTINET_CNI_HOOK ]] ||
    die "MULTINET_CNI=multinet needs the hook $MULTINET_CNI_HOOK (installs multinetd + shim); it does not exist yet" ;;
  *) die "MULTINET_CNI=$MULTINET_CNI: want bridge or multinet" ;;
  esac
  [[ $DEFAULT_NETWORK == containerd || $DEFAULT_NETWORK == kindnet ]] || die "DEFAULT_NETWORK=$DEFAULT_NETWORK: want containerd or kindnet"
  [[ $MULTINET_DEPLOY == manifests || $MULTINET_DEPLOY == helm || $MULTINET_DEPLOY == host ]] || die "MULTINET_DEPLOY=$MULTINET_DEPLOY: want manifests, helm or host"
  [[ $POD_CIDR =~ ^10\.([0-9]{1,3})\.([0-9]{1,3})\.0/(1[6-9]|2[0-4])$ ]] && ((BASH_REMATCH[1] < 256 && BASH_REMATCH[2] < 256)) ||
    die "POD_CIDR=$POD_CIDR: want a 10.x.y.0/16-24 subnet (only inside this machine)"
  [[ $KUBELET_MAX_PODS =~ ^[1-9][0-9]{0,3}$ ]] || die "KUBELET_MAX_PODS=$KUBELET_MAX_PODS: want 1 to 9999"
  [[ $NODE_NAME =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "host name '$NODE_NAME' is not a valid node name"
  nodes_preflight
}

# ---- host record (what cluster-down must undo) ------------------------------

record_host_state() {
  : >"$HOST_RECORD"
  local d s
  for d in "${HOST_DIRS[@]}"; do
    [[ -e $d ]] || echo "created-dir $d" >>"$HOST_RECORD"
  done
  for s in "${SAVED_SYSCTLS[@]}"; do
    echo "sysctl $s $(sysctl -n "$s" 2>/dev/null | tr '\t' ' ')" >>"$HOST_RECORD"
  done
  # The default network's host-local state on its own too: on a host whose
  # /var/lib/cni existed before, cluster-down still removes what it holds.
  for d in "${DELEGATE_STATE_DIRS[@]}" /var/lib/cni/networks/"$DEFAULT_NETWORK_NAME" /run/cni-ipam-state/"$DEFAULT_NETWORK_NAME"; do
    [[ -e $d ]] || echo "created-tree $d" >>"$HOST_RECORD"
  done
  # portmap, bridge's ipMasq and firewall add CNI-* chains; cluster-down
  # removes them when the host had none before.
  iptables -w 5 -t nat -S 2>/dev/null | grep -q -- '^-N CNI-' || echo "cni-iptables-chains" >>"$HOST_RECORD"
  # multinetd's container mounts the node's / with HostToContainer
  # propagation (delegates run chrooted into it), which needs / to be a
  # shared mount, as it is on a systemd host; this machine's is private.
  local prop
  prop=$(findmnt -no PROPAGATION /)
  if [[ $prop == private ]]; then
    mount --make-rshared / || die "mount --make-rshared / failed"
    echo "root-propagation $prop" >>"$HOST_RECORD"
  fi
}

ensure_hosts_entry() {
  # kubectl exec/logs: the API server dials the kubelet by node name.
  if getent ahostsv4 "$NODE_NAME" 2>/dev/null | awk '{print $1}' | grep -qx 127.0.0.1; then
    return 0
  fi
  echo "127.0.0.1 $NODE_NAME $HOSTS_MARK" >>/etc/hosts
  echo "hosts-line 127.0.0.1 $NODE_NAME $HOSTS_MARK" >>"$HOST_RECORD"
}

# ---- certificates and kubeconfigs --------------------------------------------

make_pki() {
  mkdir -p "$PKI_DIR"
  gen_key "$PKI_DIR/ca.key"
  openssl req -x509 -new -key "$PKI_DIR/ca.key" -subj "/CN=multinet-local-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI_DIR/ca.crt" 2>/dev/null
  openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
  gen_cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:$FIRST_SERVICE_IP,IP:$NODE_IP,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  gen_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  gen_cert admin "/O=system:masters/CN=multinet-admin" clientAuth
  gen_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  gen_cert scheduler "/CN=system:kube-scheduler" clientAuth
  gen_cert kube-proxy "/CN=system:kube-proxy" clientAuth
  gen_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  gen_cert kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:127.0.0.1,IP:$NODE_IP,DNS:$NODE_NAME,DNS:localhost"
  write_kubeconfig "$KUBECONFIG_FILE" admin
  write_kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" scheduler
  write_kubeconfig "$CLUSTER_DIR/kube-proxy.kubeconfig" kube-proxy
  write_kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" kubelet-client
}

# ---- components -----------------------------------------------------------------

start_etcd() {
  start_component etcd etcd --name multinet --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "multinet=http://127.0.0.1:$ETCD_PEER_PORT" \
    --log-level warn --logger zap
  wait_until "etcd health" 60 etcd curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
}

start_apiserver() {
  start_component kube-apiserver "$K8S_BIN_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
    --client-ca-file "$PKI_DIR/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI_DIR/sa.pub" --service-account-signing-key-file "$PKI_DIR/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --kubelet-client-certificate "$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI_DIR/ca.crt" \
    --profiling=false --v=1
  wait_until "kube-apiserver /readyz" 120 "etcd kube-apiserver" apiserver_ready
}

# make_node_network gives the node its address: NODE_IP on a bridge of its
# own (NODE_BRIDGE, no ports), as a node's address on its NIC. The API
# server listens there (the kubernetes Service's endpoint), the kubelet
# reports it as the node's InternalIP, and kube-proxy's rules send Service
# traffic from pods and from the host to it.
make_node_network() {
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/$NODE_PREFIX" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
}

apply_crds() {
  local dir=$MULTINET_ROOT/deploy/crds src names
  if [[ -f $dir/kustomization.yaml ]]; then
    src=(-k "$dir")
  elif compgen -G "$dir/*.yaml" >/dev/null; then
    src=(-f "$dir")
  else
    log "no CRDs in deploy/crds yet; skipping"
    return 0
  fi
  names=$(kc apply "${src[@]}" -o name 2>"$LOG_DIR/crds.log") || { cat "$LOG_DIR/crds.log" >&2; die "applying deploy/crds failed"; }
  # shellcheck disable=SC2086
  kc wait --for condition=Established --timeout 60s $names >>"$LOG_DIR/crds.log" 2>&1 ||
    { cat "$LOG_DIR/crds.log" >&2; die "CRDs of deploy/crds not Established"; }
  log "applied CRDs: $(echo $names)"
}

start_controllers() {
  start_component kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" \
    --kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
    --service-account-private-key-file "$PKI_DIR/sa.key" --root-ca-file "$PKI_DIR/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file "$PKI_DIR/ca.crt" --cluster-signing-key-file "$PKI_DIR/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --v=1
  start_component kube-scheduler "$K8S_BIN_DIR/kube-scheduler" \
    --kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --v=1
}

# start_kube_proxy runs kube-proxy (same build, iptables mode) on the host, as
# kubeadm's DaemonSet would with hostNetwork: it makes Services work for pods
# and for the host. It leaves the host's conntrack sysctls alone and does not
# open NodePorts on loopback (no route_localnet).
start_kube_proxy() {
  cat >"$CLUSTER_DIR/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false, masqueradeAll: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start_component kube-proxy "$K8S_BIN_DIR/kube-proxy" --config "$CLUSTER_DIR/kube-proxy-config.yaml" --v=1
  wait_until "kube-proxy /healthz" 60 "kube-apiserver kube-proxy" \
    curl -fsS -o /dev/null "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/livez"
}

write_containerd_config() {
  mkdir -p "$CONTAINERD_DIR"/{root,state,runc,opt}
  cat >"$CONTAINERD_DIR/config.toml" <<EOF
# containerd $CONTAINERD_VERSION of the multinet local cluster
# (hack/cluster-up.sh). Everything under $CONTAINERD_DIR; CNI dirs are the
# cluster's own, never /etc/cni/net.d.
version = 4
root = "$CONTAINERD_DIR/root"
state = "$CONTAINERD_DIR/state"
# Not the host's /etc/containerd/conf.d (the default).
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[plugins."io.containerd.server.v1.grpc"]
  address = "$CONTAINERD_SOCKET"

[plugins."io.containerd.server.v1.ttrpc"]
  address = "$CONTAINERD_DIR/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_DIR/opt"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$IMAGE_REF"

[plugins."io.containerd.cri.v1.runtime"]
  # Pod network namespaces under the state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$CNI_BIN_DIR"]
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        # Test-environment shim only: raises negative oom_score_adj to 0
        # (this sandbox denies lowering it), then execs runc ($CLUSTER_BIN_DIR/runc).
        BinaryName = "$CLUSTER_BIN_DIR/runc-oomfix"
        Root = "$CONTAINERD_DIR/runc"
        SystemdCgroup = false
EOF
}

start_containerd() {
  mkdir -p "$CLUSTER_BIN_DIR"
  cp -f "$TOOLS_DIR/runc-oomfix" "$CONTAINERD_CACHE_DIR"/{containerd,containerd-shim-runc-v2,ctr} \
    "$RUNC_CACHE_DIR/runc" "$CLUSTER_BIN_DIR/"
  write_containerd_config
  # containerd finds its shim on PATH; runc-oomfix execs MULTINET_RUNC.
  PATH="$CLUSTER_BIN_DIR:$PATH" MULTINET_RUNC="$CLUSTER_BIN_DIR/runc" start_component containerd \
    "$CLUSTER_BIN_DIR/containerd" --config "$CONTAINERD_DIR/config.toml" --log-level warn
  wait_until "containerd socket" 60 containerd ctr_cmd version
  "$TOOLS_DIR/mkimage" -busybox /bin/busybox -ref "$IMAGE_REF" -o "$CLUSTER_DIR/busybox-image.tar"
  ctr_cmd images import "$CLUSTER_DIR/busybox-image.tar" >"$LOG_DIR/image-import.log" 2>&1 ||
    { cat "$LOG_DIR/image-import.log" >&2; die "ctr images import of $IMAGE_REF failed"; }
  # Keep the image from the kubelet's image garbage collector.
  ctr_cmd images label "$IMAGE_REF" io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
}

# default_network_conflist prints the default network as a distribution
# ships it, with this cluster's bridge and subnet (DEFAULT_NETWORK):
#   containerd: containerd's example 10-containerd-net.conflist (bridge,
#     host-local with its default dataDir /var/lib/cni/networks, portmap),
#     with one change: "hairpinMode": true instead of "promiscMode": true
#     (the bridge plugin refuses both). With kube-proxy and br_netfilter a
#     pod reaches its own Service only through hairpin on its bridge port:
#     the DNATed frame goes back out the port it came in on. The promiscuous
#     bridge does not make that work (kubenet paired it with ebtables rules);
#     e2e TestServicesAndClusterDNS fails with the example as shipped;
#   kindnet: kind's kindnetd conflist (ptp, host-local with dataDir
#     /run/cni-ipam-state, portmap).
# Both keep their state in the node's standard directories, which is why
# delegates must run in the node's view (docs/decisions/deploy.md).
default_network_conflist() {
  case $DEFAULT_NETWORK in
  kindnet)
    cat <<EOF
{
  "cniVersion": "0.3.1",
  "name": "$DEFAULT_NETWORK_NAME",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{"dst": "0.0.0.0/0"}],
        "ranges": [[{"subnet": "$POD_CIDR"}]]
      },
      "mtu": 1500
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
EOF
    ;;
  *)
    cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$DEFAULT_NETWORK_NAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE_NAME",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
EOF
    ;;
  esac
}

install_cni() {
  mkdir -p "$CNI_BIN_DIR" "$CNI_CONF_DIR" "$CNI_IPAM_DIR"
  local p
  for p in "${CNI_PLUGINS[@]}"; do cp -f "$CNI_CACHE_DIR/$(basename "$p")" "$CNI_BIN_DIR/"; done
  # In the runtime's conf dir in both modes, as a cluster's default network
  # is: with MULTINET_CNI=multinet, multinetd's 00-multinet.conflist sorts
  # first once written (the hook runs before the kubelet starts, so no pod
  # sees the bridge alone), and the runtime falls back to this file when
  # multinet is uninstalled (multinetd removes its own).
  DEFAULT_NETWORK_CONF=$CNI_CONF_DIR/10-$DEFAULT_NETWORK_NAME.conflist
  default_network_conflist >"$DEFAULT_NETWORK_CONF"
}

write_env_file() {
  cat >"$ENV_FILE.tmp" <<EOF
# Written by hack/cluster-up.sh; source it: set -a; . $ENV_FILE; set +a
export MULTINET_CLUSTER_DIR=$CLUSTER_DIR
export KUBECONFIG=$KUBECONFIG_FILE
export KUBECTL=$(kubectl_bin)
export K8S_VERSION=$K8S_VERSION
export CONTAINERD_VERSION=$CONTAINERD_VERSION
export RUNC_VERSION=$RUNC_VERSION
export CTR=$CTR
export NODE_NAME=$NODE_NAME
export NODE_IP=$NODE_IP
export APISERVER_URL=https://$NODE_IP:$APISERVER_PORT
export CA_CERT=$PKI_DIR/ca.crt
export CA_KEY=$PKI_DIR/ca.key
export CNI_MODE=$MULTINET_CNI
export CNI_BIN_DIR=$CNI_BIN_DIR
export CNI_CONF_DIR=$CNI_CONF_DIR
export CNI_IPAM_DIR=$CNI_IPAM_DIR
export CNI_PLUGINS_VERSION=$CNI_PLUGINS_VERSION
export DEFAULT_NETWORK=$DEFAULT_NETWORK
export DEFAULT_NETWORK_NAME=$DEFAULT_NETWORK_NAME
export DEFAULT_NETWORK_CONF=$DEFAULT_NETWORK_CONF
export DEFAULT_NETWORK_BRIDGE=$BRIDGE_NAME
export POD_CIDR=$POD_CIDR
export POD_GATEWAY=$POD_GATEWAY
export SERVICE_CIDR=$SERVICE_CIDR
export FIRST_SERVICE_IP=$FIRST_SERVICE_IP
export DNS_SERVICE_IP=$DNS_SERVICE_IP
export CLUSTER_DOMAIN=$CLUSTER_DOMAIN
export CONTAINERD_SOCKET=$CONTAINERD_SOCKET
export CONTAINERD_NAMESPACE=$CONTAINERD_NAMESPACE
export CONTAINERD_NETNS_DIR=$CONTAINERD_NETNS_DIR
export KUBELET_ROOT_DIR=$KUBELET_ROOT_DIR
export STATIC_POD_DIR=$STATIC_POD_DIR
export PODRESOURCES_SOCKET=$PODRESOURCES_SOCKET
export DEVICE_PLUGINS_DIR=$DEVICE_PLUGINS_DIR
export KUBELET_REGISTRATION_SOCKET=$DEVICE_PLUGINS_DIR/kubelet.sock
export TEST_IMAGE=$IMAGE_REF
export SANDBOX_IMAGE=$IMAGE_REF
export LOG_DIR=$LOG_DIR
export PID_DIR=$PID_DIR
export NODES=$NODES
export NODES_FILE=$NODES_FILE
export NODE_LAYOUTS="$NODE_LAYOUTS"
export K3S_CNI_BIN_DIR=$K3S_CNI_BIN_DIR
export K3S_CNI_CONF_DIR=$K3S_CNI_CONF_DIR
export NIX_CNI_PACKAGE=$NIX_CNI_PACKAGE
export UNDERLAY_IF=$UNDERLAY_IF
EOF
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
}

run_cni_hook() {
  [[ $MULTINET_CNI == multinet ]] || return 0
  log "MULTINET_CNI=multinet: running $MULTINET_CNI_HOOK up"
  MULTINET_CLUSTER_ENV=$ENV_FILE "$MULTINET_CNI_HOOK" up >"$LOG_DIR/cni-hook.log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/cni-hook.log" >&2; die "$MULTINET_CNI_HOOK up failed (log: $LOG_DIR/cni-hook.log)"; }
}

start_kubelet() {
  mkdir -p "$KUBELET_ROOT_DIR" "$LOG_DIR/pods"
  cat >"$CLUSTER_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI_DIR/kubelet-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
imageServiceEndpoint: unix://$CONTAINERD_SOCKET
podLogsDir: $LOG_DIR/pods
# No KUBE-FIREWALL/canary chains in the host's iptables.
makeIPTablesUtilChains: false
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$DNS_SERVICE_IP]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# The disk is shared with other work: evict only when it is really full and
# never garbage-collect the locally imported image.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 5s
maxPods: $KUBELET_MAX_PODS
# A container that exits is restarted within 10 s however often it crashed,
# instead of kubelet's default backoff of up to 5 min (KubeletCrashLoopBackOffMax,
# beta and on since v1.35): the tests kill multinetd on purpose, many times
# (docs/decisions/cluster.md "Crash-loop backoff").
crashLoopBackOff: {maxContainerRestartPeriod: 10s}
# Static pods (e2e: TestStaticPodNetworks, the Multus e2e static pod scenario).
staticPodPath: $STATIC_POD_DIR
EOF
  mkdir -p "$STATIC_POD_DIR"
  start_component kubelet "$K8S_BIN_DIR/kubelet" \
    --config "$CLUSTER_DIR/kubelet-config.yaml" --kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --root-dir "$KUBELET_ROOT_DIR" --v=1
  wait_until "node $NODE_NAME Ready" 180 "kube-apiserver containerd kubelet" node_ready
}

smoke_pod_ip() {
  [[ $(kc -n default get pod multinet-smoke -o jsonpath='{.status.phase}') == Running ]] &&
    [[ -n $(kc -n default get pod multinet-smoke -o jsonpath='{.status.podIP}') ]]
}

# deploy_manifests swaps the host-process components for the DaemonSets and
# the Deployment of deploy/overlays/local (MULTINET_DEPLOY=manifests).
deploy_manifests() {
  [[ $MULTINET_CNI == multinet && ($MULTINET_DEPLOY == manifests || $MULTINET_DEPLOY == helm) ]] || return 0
  log "MULTINET_DEPLOY=$MULTINET_DEPLOY: make images + kubectl apply -k deploy/overlays/local (hack/cluster-deployed.sh up)"
  local t=$SECONDS
  MULTINET_DEPLOY=$MULTINET_DEPLOY MULTINET_CLUSTER_ENV=$ENV_FILE "$MULTINET_ROOT/hack/cluster-deployed.sh" up >"$LOG_DIR/deploy.log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/deploy.log" >&2; die "hack/cluster-deployed.sh up failed (log: $LOG_DIR/deploy.log)"; }
  log "multinet deployed in $((SECONDS - t))s: multinetd, multinet-webhook, multinet-deviceplugin Ready"
}

smoke_test() {
  wait_until "service account default/default" 60 kube-controller-manager kc -n default get serviceaccount default
  kc -n default delete pod multinet-smoke --ignore-not-found --grace-period=0 --force >/dev/null 2>&1 || true
  apply_smoke_pod multinet-smoke
  if ! wait_until "pod default/multinet-smoke Running with an IP" 120 "kube-scheduler containerd kubelet" smoke_pod_ip; then
    log "pod default/multinet-smoke:"
    kc -n default describe pod multinet-smoke 2>&1 | sed -n '/^Events:/,$p' | tail -n 15 >&2 || true
    explain_failure containerd
    return 1
  fi
  local ip
  ip=$(kc -n default get pod multinet-smoke -o jsonpath='{.status.podIP}')
  log "smoke pod default/multinet-smoke runs with IP $ip; deleting it"
  kc -n default delete pod multinet-smoke --wait=true --timeout=60s >/dev/null
}

up() {
  local t0=$SECONDS
  preflight
  mkdir -p "$MULTINET_ROOT/_output"
  if [[ -d $CLUSTER_DIR ]] && cluster_healthy; then
    local running
    running=$(sed -n 's/^export DEFAULT_NETWORK=//p' "$ENV_FILE" 2>/dev/null)
    [[ -z $running || $running == "$DEFAULT_NETWORK" ]] ||
      die "the running cluster's default network is $running, not DEFAULT_NETWORK=$DEFAULT_NETWORK: make cluster-down first"
    running=$(nodes_count)
    ((running == NODES)) || die "the running cluster has $running node(s), not NODES=$NODES: make cluster-down first"
    running=$(sed -n 's/^export NODE_LAYOUTS=//p' "$ENV_FILE" 2>/dev/null | tr -d '"')
    [[ -z $running || $running == "$NODE_LAYOUTS" ]] ||
      die "the running cluster's node layouts are \"$running\", not NODE_LAYOUTS=\"$NODE_LAYOUTS\": make cluster-down first"
    if nodes_healthy; then
      log "cluster already up and healthy ($NODES node(s): $(awk '{print $1}' "$NODES_FILE" 2>/dev/null | tr '\n' ' ' || echo "$NODE_NAME")); KUBECONFIG=$KUBECONFIG_FILE; env: $ENV_FILE"
      return 0
    fi
  fi
  if [[ -d $CLUSTER_DIR ]] || ip link show "$BRIDGE_NAME" >/dev/null 2>&1; then
    log "found leftovers of an earlier cluster that is not healthy; cleaning up first"
    MULTINET_CLUSTER_LOCKED=1 "$MULTINET_ROOT/hack/cluster-down.sh" || die "cleaning up the earlier cluster failed"
  fi

  ensure_packages
  ensure_k8s_binaries
  check_kubectl_skew
  ensure_containerd
  ensure_runc
  ensure_coredns
  ensure_cni_plugins
  ensure_tools
  log "dependencies ready ($((SECONDS - t0))s)"

  local port
  for port in $ETCD_CLIENT_PORT $ETCD_PEER_PORT $APISERVER_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT \
    $CONTROLLER_MANAGER_PORT $SCHEDULER_PORT $KUBE_PROXY_HEALTHZ_PORT $KUBE_PROXY_METRICS_PORT; do
    port_in_use "$port" && die "TCP port $port is in use by another process: $(ss -Hltnp "sport = :$port" | head -n 1)"
  done

  mkdir -p "$CLUSTER_DIR" "$LOG_DIR" "$PID_DIR"
  record_host_state
  ensure_hosts_entry
  make_pki
  install_cni
  write_env_file

  local t1=$SECONDS
  start_etcd
  make_node_network
  nodes_up_namespaces
  start_apiserver
  log "etcd and kube-apiserver ready ($((SECONDS - t1))s)"
  apply_crds
  start_controllers
  start_containerd
  run_cni_hook
  start_kubelet
  log "node $NODE_NAME Ready ($((SECONDS - t1))s after start)"
  start_kube_proxy
  deploy_manifests
  nodes_up_components
  deploy_coredns
  smoke_test
  nodes_smoke_test
  log "cluster up in $((SECONDS - t0))s: KUBECONFIG=$KUBECONFIG_FILE; env: $ENV_FILE (source it); logs: $LOG_DIR"
}

if [[ -n ${MULTINET_CLUSTER_LOCKED:-} ]]; then up; else with_lock up; fi
