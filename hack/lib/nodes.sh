# shellcheck shell=bash
# The extra nodes of a multi-node local cluster (make cluster-up NODES=N,
# N > 1; docs/local-cluster.md "Several nodes", docs/decisions/cluster.md).
# Source it after hack/lib/cluster.sh; it defines variables and functions and
# starts nothing.
#
# The host stays node 1 (control plane and the node it always was). Nodes
# 2..N are multinet-node2..N, each in network, mount and UTS namespaces of its
# own, held open by a holder process (sleep infinity, PID file
# pids/<node>-holder.pid). In its mount namespace:
#   - the cluster's per-node paths (containerd's dir, the kubelet's root dir,
#     cni/, multinet/, the static pod dir) and the node's standard dirs (/run,
#     /var/lib/kubelet, /var/lib/cni, /var/log/pods, /var/log/containers) are
#     bind mounts of nodes/<node>/<key>: every path is the same as on node 1,
#     so deploy/overlays/local's hostPaths work unchanged on every node;
#   - /sys is a sysfs of its network namespace (the device plugin reads
#     /sys/class/net), with the host's cgroup mounts moved under it;
#   - / is rshared (multinetd mounts the node's / with HostToContainer).
# Its network namespace has the underlay link mnul0 (a veth whose peer mnuK
# is a port of the node bridge mnnode0) with NODE_IP's subnet's .K, a default
# route to the host (10.249.0.1: the API server) and a route to every other
# node's pod subnet. The host gets mnul0 too (peer mnu1 on mnnode0), so that
# a macvlan on mnul0 spans every node. Each node runs its own containerd,
# kubelet (cgroup root /<node>) and kube-proxy, entered with
# nsenter into the holder's namespaces.

NODES=${NODES:-1}
NODES_DIR=$CLUSTER_DIR/nodes
# One line per node, node 1 first: name ip pod-cidr holder-pid netns-inode
# (holder-pid and netns-inode are "-" for the host).
NODES_FILE=$NODES_DIR/nodes.txt
# Every node's interface on the underlay (mnnode0), the same name on every
# node: the master of a macvlan network that spans the nodes.
UNDERLAY_IF=mnul0
NODE_CGROUP_PREFIX= # node K's cgroup root is /multinet-nodeK
# Netdev pool devices (veth pairs mnv0.. as on the host) on each extra node:
# a space-separated count per node, node 2 first; missing counts are 2.
# Pools differ per node on purpose (the device plugin's config names mnv0..3
# on every node; a node shows only the devices it has as healthy).
EXTRA_NODE_NETDEVS=${EXTRA_NODE_NETDEVS:-2 1}

# The DRA driver's netdevs (mnr0..) on each extra node: as many as the host
# has (hack/cluster-devices.sh DRA_NETDEV_COUNT).
EXTRA_NODE_DRA_NETDEVS=2

# Node layouts (docs/local-cluster.md "Node layouts",
# docs/decisions/cluster.md): how a node's runtime finds its CNI plugins.
# NODE_LAYOUTS has one word per node, node 1 first; a node it does not
# name is plain. Node 1, the host, is always plain. Default: "plain k3s
# nixos" on a cluster of 3 nodes, every node plain otherwise.
#   plain  containerd's bin_dirs and conf_dir are the cluster's cni/bin and
#          cni/net.d, the plugins regular files in it;
#   k3s    k3s's paths: bin_dirs [K3S_CNI_BIN_DIR] (data/current/bin, current
#          an absolute symlink to the release dir data/K3S_RELEASE) and
#          conf_dir K3S_CNI_CONF_DIR; every reference plugin in the release's
#          bin/ is a relative symlink to bin/cni, the multi-call dispatcher
#          hack/tools/cni-multicall, which runs the plugin of its argv[0]'s
#          name from the release's bin/.multicall/. The node's
#          /var/lib/rancher/k3s is nodes/<node>/rancher-k3s; its cluster
#          cni/bin and cni/net.d are the release's bin/ and the k3s conf dir
#          (bind mounts: the DaemonSets' hostPaths, the same on every node,
#          reach them, and multinetd takes the bin dir from containerd);
#   nixos  the cluster's paths, every reference plugin an absolute symlink
#          into the store dir NIX_CNI_PACKAGE/bin (the node's /nix is
#          nodes/<node>/nix).
if [[ -z ${NODE_LAYOUTS:-} ]]; then
  NODE_LAYOUTS=plain
  [[ $NODES != 3 ]] || NODE_LAYOUTS="plain k3s nixos"
fi
K3S_DIR=/var/lib/rancher/k3s
K3S_RELEASE=release-1
K3S_CNI_BIN_DIR=$K3S_DIR/data/current/bin
K3S_CNI_CONF_DIR=$K3S_DIR/agent/etc/cni/net.d
NIX_CNI_PACKAGE=/nix/store/0multinet0local0cluster0store0-cni-plugins-${CNI_PLUGINS_VERSION#v}

# node_layout K: node K's layout (NODE_LAYOUTS).
node_layout() {
  local -a l
  read -r -a l <<<"$NODE_LAYOUTS"
  echo "${l[$(($1 - 1))]:-plain}"
}

extra_node_name() { echo "multinet-node$1"; }
extra_node_ip() { echo "${NODE_IP%.*}.$1"; }
# node_pod_cidr K: node K's pod subnet, POD_CIDR's /24 moved up by K-1.
node_pod_cidr() {
  local a b c
  IFS=. read -r a b c _ <<<"${POD_CIDR%/*}"
  echo "$a.$b.$((c + $1 - 1)).0/24"
}
extra_node_netdevs() { # extra_node_netdevs K: node K's netdev pool size
  local -a counts
  read -r -a counts <<<"$EXTRA_NODE_NETDEVS"
  echo "${counts[$(($1 - 2))]:-2}"
}

# node_binds prints "key target" for each path an extra node has its own
# copy of, nodes/<node>/<key> bind-mounted on target.
# node_binds K: node K's, in mount order; a key may name a sub-directory of
# another (the layouts' binds, after the ones they cover).
node_binds() {
  cat <<EOF
containerd $CONTAINERD_DIR
kubelet $KUBELET_ROOT_DIR
cni $CLUSTER_DIR/cni
multinet $CLUSTER_DIR/multinet
manifests $STATIC_POD_DIR
run /run
var-lib-kubelet /var/lib/kubelet
var-lib-cni /var/lib/cni
var-log-pods /var/log/pods
var-log-containers /var/log/containers
EOF
  case $(node_layout "$1") in
  k3s)
    cat <<EOF
rancher-k3s $K3S_DIR
rancher-k3s/data/$K3S_RELEASE/bin $CLUSTER_DIR/cni/bin
rancher-k3s${K3S_CNI_CONF_DIR#"$K3S_DIR"} $CLUSTER_DIR/cni/net.d
EOF
    ;;
  nixos) echo "nix /nix" ;;
  esac
}

# mkdir_recorded DIR: mkdir -p DIR, recording each directory it creates in
# HOST_RECORD (parents first; cluster-down removes them, children first,
# when empty).
mkdir_recorded() {
  local d=$1 missing=()
  while [[ ! -e $d ]]; do
    missing=("$d" "${missing[@]}")
    d=$(dirname "$d")
  done
  ((${#missing[@]})) || return 0
  mkdir -p "$1"
  for d in "${missing[@]}"; do echo "created-dir $d" >>"$HOST_RECORD"; done
}

nodes_preflight() {
  local l k=0
  for l in $NODE_LAYOUTS; do
    k=$((k + 1))
    case $l in plain | k3s | nixos) ;; *) die "NODE_LAYOUTS=\"$NODE_LAYOUTS\": node $k's layout $l: want plain, k3s or nixos" ;; esac
    ((k != 1)) || [[ $l == plain ]] || die "NODE_LAYOUTS=\"$NODE_LAYOUTS\": node 1 (the host) is plain; a layout is for an extra node"
  done
  [[ ! $NODES =~ ^[0-9]+$ ]] || ((k <= NODES)) || die "NODE_LAYOUTS=\"$NODE_LAYOUTS\" names $k nodes, NODES=$NODES"
  ((NODES == 1)) && return 0
  [[ $NODES =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 9)) || die "NODES=$NODES: want 1 to 9"
  [[ $MULTINET_CNI == multinet && ($MULTINET_DEPLOY == manifests || $MULTINET_DEPLOY == helm) ]] ||
    die "NODES=$NODES needs MULTINET_CNI=multinet and MULTINET_DEPLOY=manifests or helm (multinet runs as DaemonSets on every node)"
  [[ ${POD_CIDR#*/} == 24 ]] || die "NODES=$NODES needs a /24 POD_CIDR (node K gets the K-th /24): $POD_CIDR"
  command -v unshare >/dev/null && command -v nsenter >/dev/null || die "NODES=$NODES needs unshare and nsenter (util-linux)"
}

# make_node_cgroups NAME: the kubelet's cgroup root /NAME in every
# cgroup v1 hierarchy (the kubelet refuses a cgroup root that does not
# exist); cpuset gets its parent's cpus and mems.
make_node_cgroups() {
  local cg=$NODE_CGROUP_PREFIX$1 h
  for h in /sys/fs/cgroup/*/; do
    [[ -L ${h%/} ]] && continue
    mkdir -p "$h$cg" 2>/dev/null || continue
    if [[ -f ${h}cpuset.cpus ]]; then
      cat "${h}cpuset.cpus" >"$h$cg/cpuset.cpus"
      cat "${h}cpuset.mems" >"$h$cg/cpuset.mems"
    fi
  done
}

# start_node_holder K: the namespaces of node K and their holder process.
start_node_holder() {
  local k=$1 name d key target
  name=$(extra_node_name "$k")
  d=$NODES_DIR/$name
  mkdir -p "$d/.cgroup" "$LOG_DIR/$name" "$d/cni/bin" "$d/cni/net.d"
  {
    echo "set -eu"
    echo "hostname $name"
    echo "ip link set lo up"
    echo "mount --rbind /sys/fs/cgroup $d/.cgroup"
    echo "mount -t sysfs sysfs /sys"
    echo "mount --move $d/.cgroup /sys/fs/cgroup"
    while read -r key target; do
      mkdir -p "$d/$key"
      # A mount point outside the cluster dir (a layout's /nix) is made on
      # the host's file system: cluster-down removes it.
      if [[ $target == "$CLUSTER_DIR"/* ]]; then mkdir -p "$target"; else mkdir_recorded "$target"; fi
      echo "mount --bind $d/$key $target"
    done < <(node_binds "$k")
    echo "mount --make-rshared /"
    echo ": >$d/ready"
    echo "exec sleep infinity"
  } >"$d/holder.sh"
  rm -f "$d/ready"
  (
    [[ -n ${LOCK_FD:-} ]] && exec {LOCK_FD}>&-
    exec setsid unshare --net --mount --uts --propagation private -- bash "$d/holder.sh" \
      >>"$LOG_DIR/$name/holder.log" 2>&1 </dev/null
  ) &
  local pid=$!
  echo "$pid" >"$PID_DIR/$name-holder.pid"
  readlink -f "$(command -v sleep)" >"$PID_DIR/$name-holder.exe"
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -e $d/ready ]] && break
    pid_running "$pid" || { cat "$LOG_DIR/$name/holder.log" >&2; die "the namespaces of node $name could not be made"; }
    sleep 0.1
  done
  [[ -e $d/ready ]] || die "node $name: its holder did not get ready in 10s (log: $LOG_DIR/$name/holder.log)"
  # (ready is written just before the exec of sleep.)
  wait_until "node $name: holder" 10 "" component_alive "$name-holder"
}

# node_exec NAME CMD...: CMD in node NAME's namespaces.
node_exec() {
  local pid
  pid=$(component_pid "$1-holder") || die "node $1: its holder is not running"
  shift
  nsenter -t "$pid" -n -m -u -- "$@"
}

# make_node_network K: the underlay link of node K, its address and routes.
make_node_network_of() {
  local k=$1 name ip pid
  name=$(extra_node_name "$k")
  ip=$(extra_node_ip "$k")
  pid=$(component_pid "$name-holder")
  ip link add "mnu$k" type veth peer name "$UNDERLAY_IF" netns "$pid"
  ip link set "mnu$k" master "$NODE_BRIDGE" up
  node_exec "$name" ip addr add "$ip/$NODE_PREFIX" dev "$UNDERLAY_IF"
  node_exec "$name" ip link set "$UNDERLAY_IF" up
  node_exec "$name" ip route add default via "$NODE_IP"
  node_exec "$name" sysctl -qw net.ipv4.ip_forward=1
  # The host's route to the node's pods.
  ip route replace "$(node_pod_cidr "$k")" via "$ip" dev "$NODE_BRIDGE"
}

# nodes_up_namespaces makes nodes 2..N (namespaces, underlay, routes,
# cgroups, directories) before any node component starts, and writes
# $NODES_FILE. The host's own mnul0 too.
nodes_up_namespaces() {
  ((NODES > 1)) || return 0
  mkdir -p "$NODES_DIR" "$CLUSTER_DIR/multinet" "$STATIC_POD_DIR"
  ip link add "$UNDERLAY_IF" type veth peer name mnu1
  ip link set mnu1 master "$NODE_BRIDGE" up
  ip link set "$UNDERLAY_IF" up
  echo "$NODE_NAME $NODE_IP $POD_CIDR - -" >"$NODES_FILE"
  local k j name pid
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    make_node_cgroups "$name"
    echo "cgroup $NODE_CGROUP_PREFIX$name" >>"$HOST_RECORD"
    start_node_holder "$k"
    make_node_network_of "$k"
    pid=$(component_pid "$name-holder")
    echo "$name $(extra_node_ip "$k") $(node_pod_cidr "$k") $pid $(stat -L -c %i "/proc/$pid/ns/net")" >>"$NODES_FILE"
    echo "$(extra_node_ip "$k") $name $HOSTS_MARK" >>/etc/hosts
    echo "hosts-line $(extra_node_ip "$k") $name $HOSTS_MARK" >>"$HOST_RECORD"
  done
  # Every node's route to every other extra node's pods (node 1's: its
  # default route, the host).
  for ((k = 2; k <= NODES; k++)); do
    for ((j = 2; j <= NODES; j++)); do
      ((j == k)) && continue
      node_exec "$(extra_node_name "$k")" ip route add "$(node_pod_cidr "$j")" via "$(extra_node_ip "$j")"
    done
  done
  log "nodes 2..$NODES: namespaces, underlay $UNDERLAY_IF on $NODE_BRIDGE, pod subnets $(awk 'NR > 1 {print $3}' "$NODES_FILE" | tr '\n' ' ')"
}

# node_pki K: node K's kubelet client and serving certificates, kubeconfig.
node_pki() {
  local k=$1 name ip
  name=$(extra_node_name "$k")
  ip=$(extra_node_ip "$k")
  gen_cert "kubelet-client-$name" "/O=system:nodes/CN=system:node:$name" clientAuth
  gen_cert "kubelet-serving-$name" "/CN=$name" serverAuth "IP:127.0.0.1,IP:$ip,DNS:$name,DNS:localhost"
  write_kubeconfig "$NODES_DIR/$name/kubelet.kubeconfig" "kubelet-client-$name"
}

# node_files K: node K's containerd config (node 1's: the paths are the
# same in its mount namespace), CNI plugins and default network (its pod
# subnet), kubelet and kube-proxy configurations.
node_files() {
  local k=$1 name ip d
  name=$(extra_node_name "$k")
  ip=$(extra_node_ip "$k")
  d=$NODES_DIR/$name
  mkdir -p "$d/containerd"/{root,state,runc,opt} "$d/containerd/state/io.containerd.grpc.v1.cri/netns" \
    "$d/cni/bin" "$d/cni/net.d" "$d/cni/ipam" "$d/multinet/state" "$d/multinet/run" "$LOG_DIR/$name/pods"
  local layout conf_dir
  layout=$(node_layout "$k")
  node_containerd_config "$layout" <"$CONTAINERD_DIR/config.toml" >"$d/containerd/config.toml" ||
    die "node $name: its containerd config ($layout) could not be written"
  conf_dir=$(node_cni_files "$layout" "$d" "$CNI_BIN_DIR") || die "node $name: laying out its CNI plugins ($layout) failed"
  POD_CIDR=$(node_pod_cidr "$k") default_network_conflist >"$conf_dir/10-$DEFAULT_NETWORK_NAME.conflist"
  sed -e "s#^address: 127.0.0.1#address: $ip#" \
    -e "s#^tlsCertFile: .*#tlsCertFile: $PKI_DIR/kubelet-serving-$name.crt#" \
    -e "s#^tlsPrivateKeyFile: .*#tlsPrivateKeyFile: $PKI_DIR/kubelet-serving-$name.key#" \
    -e "s#^podLogsDir: .*#podLogsDir: $LOG_DIR/$name/pods#" \
    "$CLUSTER_DIR/kubelet-config.yaml" >"$d/kubelet-config.yaml"
  echo "cgroupRoot: /$NODE_CGROUP_PREFIX$name" >>"$d/kubelet-config.yaml"
  sed -e "s#^hostnameOverride: .*#hostnameOverride: $name#" \
    -e "s#^clusterCIDR: .*#clusterCIDR: $(node_pod_cidr "$k")#" \
    -e "s#^bindAddress: .*#bindAddress: $ip#" \
    -e "s#^nodePortAddresses: .*#nodePortAddresses: [\"$ip/32\"]#" \
    "$CLUSTER_DIR/kube-proxy-config.yaml" >"$d/kube-proxy-config.yaml"
}

# node_containerd_config LAYOUT: node 1's containerd config.toml (stdin) as
# a node of LAYOUT has it: the same for plain and nixos, k3s's CNI dirs for
# k3s (fails when node 1's do not appear in it).
node_containerd_config() {
  local conf
  conf=$(cat)
  if [[ $1 == k3s ]]; then
    local bin="bin_dirs = [\"$CNI_BIN_DIR\"]" dir="conf_dir = \"$CNI_CONF_DIR\""
    [[ $conf == *"$bin"* && $conf == *"$dir"* ]] ||
      die "containerd's config.toml has no '$bin' and '$dir' to give k3s's CNI dirs"
    conf=${conf/"$bin"/"bin_dirs = [\"$K3S_CNI_BIN_DIR\"]"}
    conf=${conf/"$dir"/"conf_dir = \"$K3S_CNI_CONF_DIR\""}
  fi
  printf '%s\n' "$conf"
}

# is_reference_plugin NAME: NAME is one of the reference plugins cluster-up
# builds (CNI_PLUGINS), the ones a k3s or NixOS node ships in its layout.
is_reference_plugin() {
  local p
  for p in "${CNI_PLUGINS[@]}"; do [[ ${p##*/} == "$1" ]] && return 0; done
  return 1
}

# node_cni_files LAYOUT D SRC: the CNI plugins of SRC (a plain bin dir: the
# host's) laid out under the node dir D (nodes/<node>) as LAYOUT has them
# (see NODE_LAYOUTS); prints the host path of the node's runtime conf dir.
# Plugins that are not reference plugins (multinet's own, put there by an
# installer) stay regular files in the runtime's bin dir.
node_cni_files() {
  local layout=$1 d=$2 src=$3 f p
  # (Run in a command substitution, where errexit does not apply: every
  # step is checked.)
  case $layout in
  plain)
    mkdir -p "$d/cni/bin" "$d/cni/net.d" && cp -f "$src"/* "$d/cni/bin/" || return 1
    echo "$d/cni/net.d"
    ;;
  k3s)
    local rel=$d/rancher-k3s/data/$K3S_RELEASE conf=$d/rancher-k3s${K3S_CNI_CONF_DIR#"$K3S_DIR"}
    mkdir -p "$rel/bin/.multicall" "$conf" && cp -f "$TOOLS_DIR/cni-multicall" "$rel/bin/cni" || return 1
    for f in "$src"/*; do
      p=${f##*/}
      if is_reference_plugin "$p"; then
        cp -f "$f" "$rel/bin/.multicall/$p" && ln -sfn cni "$rel/bin/$p" || return 1
      else
        cp -f "$f" "$rel/bin/$p" || return 1
      fi
    done
    # current: an absolute link, to a node path (the node's K3S_DIR).
    ln -sfn "$K3S_DIR/data/$K3S_RELEASE" "$d/rancher-k3s/data/current" || return 1
    echo "$conf"
    ;;
  nixos)
    local store=$d$NIX_CNI_PACKAGE/bin
    mkdir -p "$store" "$d/cni/bin" "$d/cni/net.d" || return 1
    for f in "$src"/*; do
      p=${f##*/}
      if is_reference_plugin "$p"; then
        cp -f "$f" "$store/$p" && ln -sfn "$NIX_CNI_PACKAGE/bin/$p" "$d/cni/bin/$p" || return 1
      else
        cp -f "$f" "$d/cni/bin/$p" || return 1
      fi
    done
    echo "$d/cni/net.d"
    ;;
  *)
    echo "node layout $layout: want plain, k3s or nixos" >&2
    return 1
    ;;
  esac
}

# node_netdevs K: node K's netdev pool devices (veth pairs mnvI/mnvIp in
# its network namespace, as hack/cluster-devices.sh makes on the host) and
# the DRA driver's mnr0, mnr1 (as on the host: the e2e suite's DRA tests
# run on any node, E2E_NODE).
node_netdevs() {
  local k=$1 name i n d
  name=$(extra_node_name "$k")
  n=$(extra_node_netdevs "$k")
  local devs=()
  for ((i = 0; i < n; i++)); do devs+=("mnv$i"); done
  for ((i = 0; i < EXTRA_NODE_DRA_NETDEVS; i++)); do devs+=("mnr$i"); done
  for d in "${devs[@]}"; do
    node_exec "$name" ip link add "$d" type veth peer name "${d}p"
    node_exec "$name" ip link set "${d}p" up
    node_exec "$name" ip link set "$d" up
  done
}

# node_ctr NAME ARGS...: ctr against node NAME's containerd (its socket
# through the host path of its containerd dir).
node_ctr() {
  local name=$1
  shift
  "$CTR" --address "$NODES_DIR/$name/containerd/containerd.sock" --namespace "$CONTAINERD_NAMESPACE" "$@"
}

# node_import_images NAME TARBALL...: imports and pins the images.
node_import_images() {
  local name=$1 tar ref
  shift
  for tar in "$@"; do
    node_ctr "$name" images import "$tar" >>"$LOG_DIR/$name/image-import.log" 2>&1 ||
      { tail -n 5 "$LOG_DIR/$name/image-import.log" >&2; die "node $name: ctr images import $tar failed"; }
  done
  for ref in $(node_ctr "$name" images ls -q 2>/dev/null | grep '^localhost/'); do
    node_ctr "$name" images label "$ref" io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
  done
}

# node_start_containerd NAME: node NAME's containerd, in its namespaces.
node_start_containerd() {
  local name=$1 pid
  pid=$(component_pid "$name-holder") || die "node $name: its holder is not running"
  PATH="$CLUSTER_BIN_DIR:$PATH" MULTINET_RUNC="$CLUSTER_BIN_DIR/runc" COMPONENT_NS_PID=$pid \
    start_component "$name-containerd" "$CLUSTER_BIN_DIR/containerd" --config "$CONTAINERD_DIR/config.toml" --log-level warn
  wait_until "node $name: containerd socket" 60 "$name-containerd" node_ctr "$name" version
}

# node_start_kubelet NAME IP: node NAME's kubelet, in its namespaces.
node_start_kubelet() {
  local name=$1 ip=$2 pid
  pid=$(component_pid "$name-holder") || die "node $name: its holder is not running"
  COMPONENT_NS_PID=$pid start_component "$name-kubelet" "$K8S_BIN_DIR/kubelet" \
    --config "$NODES_DIR/$name/kubelet-config.yaml" --kubeconfig "$NODES_DIR/$name/kubelet.kubeconfig" \
    --hostname-override "$name" --node-ip "$ip" --root-dir "$KUBELET_ROOT_DIR" --v=1
}

node_ready_named() {
  [[ $(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

# nodes_up_components starts containerd, the kubelet and kube-proxy of
# nodes 2..N (after multinet is deployed on node 1: the DaemonSets then
# start on each new node as it registers) and waits until every node is
# Ready and the DaemonSets run everywhere.
nodes_up_components() {
  ((NODES > 1)) || return 0
  local k name pid t=$SECONDS images=()
  images=("$CLUSTER_DIR/busybox-image.tar" "$COREDNS_IMAGE_TAR")
  [[ -d $MULTINET_ROOT/_output/images ]] && images+=("$MULTINET_ROOT"/_output/images/*.tar)
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    pid=$(component_pid "$name-holder")
    node_pki "$k"
    node_files "$k"
    node_netdevs "$k"
    node_start_containerd "$name"
    node_import_images "$name" "${images[@]}"
    node_start_kubelet "$name" "$(extra_node_ip "$k")"
    COMPONENT_NS_PID=$pid start_component "$name-kube-proxy" "$K8S_BIN_DIR/kube-proxy" \
      --config "$NODES_DIR/$name/kube-proxy-config.yaml" --v=1
  done
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    wait_until "node $name Ready" 180 "$name-containerd $name-kubelet $name-kube-proxy" node_ready_named "$name"
  done
  local ds
  for ds in multinetd multinet-deviceplugin; do
    kc -n multinet-system rollout status "daemonset/$ds" --timeout=180s >/dev/null ||
      { kc -n multinet-system get pods -o wide >&2; die "daemonset $ds did not roll out on every node"; }
  done
  log "nodes 2..$NODES Ready, multinetd and multinet-deviceplugin run on all $NODES nodes ($((SECONDS - t))s)"
}

# nodes_smoke_test: a pod pinned to each extra node gets an IP.
nodes_smoke_test() {
  ((NODES > 1)) || return 0
  local k name ips=()
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    apply_smoke_pod "multinet-smoke-$name" "$name"
  done
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    if ! wait_until "pod default/multinet-smoke-$name Running with an IP" 120 "$name-containerd $name-kubelet" \
      eval "[[ -n \$(kc -n default get pod multinet-smoke-$name -o jsonpath='{.status.podIP}') ]]"; then
      kc -n default describe pod "multinet-smoke-$name" 2>&1 | sed -n '/^Events:/,$p' | tail -n 15 >&2 || true
      explain_failure "$name-containerd"
      return 1
    fi
    ips+=("$name=$(kc -n default get pod "multinet-smoke-$name" -o jsonpath='{.status.podIP}')")
  done
  log "smoke pods on nodes 2..$NODES run: ${ips[*]}; deleting them"
  for ((k = 2; k <= NODES; k++)); do
    kc -n default delete pod "multinet-smoke-$(extra_node_name "$k")" --wait=true --timeout=60s >/dev/null
  done
}

# nodes_healthy: every extra node's components run and it is Ready.
nodes_healthy() {
  local k name c
  for ((k = 2; k <= NODES; k++)); do
    name=$(extra_node_name "$k")
    for c in holder containerd kubelet kube-proxy; do component_alive "$name-$c" || return 1; done
    node_ready_named "$name" || return 1
  done
}

# nodes_count prints how many nodes the running cluster has (its nodes file).
nodes_count() {
  if [[ -f $NODES_FILE ]]; then wc -l <"$NODES_FILE"; else echo 1; fi
}
