# shellcheck shell=bash
# Shared settings and helpers of the local single-node cluster
# (hack/cluster-up.sh, hack/cluster-down.sh, hack/e2e.sh, hack/demo.sh).
# Source it; it defines variables and functions and starts nothing.
#
# Everything the cluster writes lives under $CLUSTER_DIR (_output/cluster);
# downloaded and built artefacts that survive cluster-down are cached under
# $CACHE_DIR (${XDG_CACHE_HOME:-$HOME/.cache}/multinet), keyed by version.

MULTINET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Kubernetes: the newest maintained minor by default; K8S_VERSION=v1.35.4
# (the oldest maintained minor) too. Each minor has its build module
# hack/k8s/v1.<minor> (hack/k8s/update.sh writes one).
K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_MINOR=$(v=${K8S_VERSION#v1.} && echo "${v%%.*}")
K8S_MODULE_DIR=$MULTINET_ROOT/hack/k8s/v1.$K8S_MINOR
# The container runtime: containerd 2.x and a runc it supports, both built
# from the Go module proxy (Debian's containerd 1.6 is out of support and
# lacks the CRI RuntimeConfig call).
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.9.1}
CACHE_DIR=${MULTINET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/multinet}
K8S_BIN_DIR=$CACHE_DIR/k8s/$K8S_VERSION
CONTAINERD_CACHE_DIR=$CACHE_DIR/containerd/$CONTAINERD_VERSION
RUNC_CACHE_DIR=$CACHE_DIR/runc/$RUNC_VERSION
# Static (CGO_ENABLED=0) builds, as the containernetworking/plugins release
# tarballs are. (Delegates run in the node's view, so dynamically linked
# plugins work too: the e2e suite runs a shell-script delegate.)
CNI_CACHE_DIR=$CACHE_DIR/cni-plugins-static/$CNI_PLUGINS_VERSION

CLUSTER_DIR=${MULTINET_CLUSTER_DIR:-$MULTINET_ROOT/_output/cluster}
TOOLS_DIR=$MULTINET_ROOT/_output/tools
LOCK_FILE=$MULTINET_ROOT/_output/cluster.lock
LAST_LOGS_DIR=$MULTINET_ROOT/_output/cluster-last-logs
LOG_DIR=$CLUSTER_DIR/logs
PID_DIR=$CLUSTER_DIR/pids
PKI_DIR=$CLUSTER_DIR/pki
ENV_FILE=$CLUSTER_DIR/env
HOST_RECORD=$CLUSTER_DIR/host-record # what cluster-up changed on the host, for cluster-down

# The default network until multinetd is the cluster's CNI (MULTINET_CNI=bridge),
# and its delegate afterwards (MULTINET_CNI=multinet).
MULTINET_CNI=${MULTINET_CNI:-multinet}
# manifests: the local cluster runs multinet as deployed by kubectl apply -k
# deploy/overlays/local (hack/cluster-deployed.sh); host: as host processes.
MULTINET_DEPLOY=${MULTINET_DEPLOY:-manifests}
MULTINET_CNI_HOOK=${MULTINET_CNI_HOOK:-$MULTINET_ROOT/hack/cluster-cni-multinet.sh}
BRIDGE_NAME=mnbr0
# The cluster's default network, a conflist a distribution ships (with this
# cluster's subnet): containerd (containerd's example 10-containerd-net.conflist:
# bridge + host-local in its default dataDir + portmap) or kindnet (kind's:
# ptp + host-local with dataDir /run/cni-ipam-state + portmap).
DEFAULT_NETWORK=${DEFAULT_NETWORK:-containerd}
case $DEFAULT_NETWORK in
kindnet) DEFAULT_NETWORK_NAME=kindnet ;;
*) DEFAULT_NETWORK_NAME=containerd-net ;;
esac
# Node directories delegates write into (host-local's default dataDir and
# kind's, tuning's and dhcp's /run/cni): cluster-down removes the ones that
# did not exist before cluster-up, with what the delegates left in them.
DELEGATE_STATE_DIRS=(/var/lib/cni /run/cni-ipam-state /run/cni)
POD_CIDR=${POD_CIDR:-10.244.0.0/24}
# The kubelet's maxPods (its own default); the policy bench raises it.
KUBELET_MAX_PODS=${KUBELET_MAX_PODS:-110}
SERVICE_CIDR=10.96.0.0/16
# The pod network's gateway, the mnbr0 bridge's address: POD_CIDR's first
# address.
POD_GATEWAY=$(net=${POD_CIDR%/*} && echo "${net%.*}.$((${net##*.} + 1))")
FIRST_SERVICE_IP=10.96.0.1
# The node's address, on a bridge of its own (the node network): the API
# server listens there and is the kubernetes Service's endpoint, reached by
# pods through kube-proxy; it is the node's InternalIP. Nothing listens on
# the host's own interfaces.
NODE_BRIDGE=mnnode0
NODE_IP=${NODE_IP:-10.249.0.1}
NODE_PREFIX=24

ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
APISERVER_PORT=6443
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
CONTROLLER_MANAGER_PORT=10257
SCHEDULER_PORT=10259

IMAGE_REF=localhost/multinet/busybox:v1
CONTAINERD_NAMESPACE=k8s.io
CONTAINERD_DIR=$CLUSTER_DIR/containerd
# Pod network namespaces (netns_mounts_under_state_dir).
CONTAINERD_NETNS_DIR=$CONTAINERD_DIR/state/io.containerd.grpc.v1.cri/netns
CONTAINERD_SOCKET=$CONTAINERD_DIR/containerd.sock
# containerd, its shim, ctr and runc, copied from the caches by cluster-up;
# containerd runs with this directory first on PATH.
CLUSTER_BIN_DIR=$CLUSTER_DIR/bin
CTR=$CLUSTER_BIN_DIR/ctr
KUBELET_ROOT_DIR=$CLUSTER_DIR/kubelet
# The kubelet's staticPodPath: manifests put here run as static pods.
STATIC_POD_DIR=$CLUSTER_DIR/manifests
# The kubelet keeps device-plugin registration at this fixed path whatever
# --root-dir says (see docs/local-cluster.md); PodResources follows --root-dir.
DEVICE_PLUGINS_DIR=/var/lib/kubelet/device-plugins
PODRESOURCES_SOCKET=$KUBELET_ROOT_DIR/pod-resources/kubelet.sock
CNI_BIN_DIR=$CLUSTER_DIR/cni/bin
CNI_CONF_DIR=$CLUSTER_DIR/cni/net.d
CNI_IPAM_DIR=$CLUSTER_DIR/cni/ipam
KUBECONFIG_FILE=$CLUSTER_DIR/kubeconfig

KUBE_PROXY_HEALTHZ_PORT=10256
KUBE_PROXY_METRICS_PORT=10249

# Components in start order; cluster-down stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy containerd kubelet)

# gcc, libc6-dev, pkg-config and libseccomp-dev build runc (cgo, seccomp).
APT_PACKAGES=(etcd-server busybox-static iproute2 jq openssl conntrack iptables curl util-linux procps
  gcc libc6-dev pkg-config libseccomp-dev)
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)
CNI_PLUGINS=(
  plugins/main/bridge plugins/main/dummy plugins/main/host-device plugins/main/ipvlan
  plugins/main/loopback plugins/main/macvlan plugins/main/ptp plugins/main/tap plugins/main/vlan
  plugins/ipam/host-local plugins/ipam/static plugins/ipam/dhcp
  plugins/meta/bandwidth plugins/meta/firewall plugins/meta/portmap plugins/meta/sbr
  plugins/meta/tuning plugins/meta/vrf
)
# Host sysctls the kubelet (kernel tunables) and the bridge plugin (isGateway)
# change; cluster-up saves them and cluster-down restores them.
SAVED_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Host paths outside $CLUSTER_DIR the components create when missing;
# cluster-down removes the ones that did not exist before (only when empty).
HOST_DIRS=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers
  /run/containerd /run/containerd/s /var/run/netns)
HOSTS_MARK="# multinet local cluster"

log() { printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "${LOG_PREFIX:-cluster}" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

node_name() { hostname | tr '[:upper:]' '[:lower:]'; }

# kubectl_bin prints the kubectl to use: $KUBECTL when set, else the one
# built at the cluster's version into the cache (never whatever is on PATH:
# kubectl supports one minor of skew from the server).
kubectl_bin() {
  if [[ -n ${KUBECTL:-} ]]; then echo "$KUBECTL"; return; fi
  echo "$K8S_BIN_DIR/kubectl"
}

# check_kubectl_skew fails with a clear message when the kubectl to use is
# missing or more than one minor away from K8S_VERSION (kubectl's supported
# version skew).
check_kubectl_skew() {
  local bin minor
  bin=$(kubectl_bin)
  [[ -x $bin ]] || die "kubectl $bin does not exist (unset KUBECTL to use the one built at $K8S_VERSION)"
  minor=$("$bin" version --client -o json 2>/dev/null | jq -r '.clientVersion.minor' | tr -dc 0-9)
  [[ -n $minor ]] || die "cannot tell the version of kubectl $bin ($bin version --client -o json)"
  if ((minor > K8S_MINOR + 1 || minor < K8S_MINOR - 1)); then
    die "kubectl $bin is v1.$minor, the cluster is $K8S_VERSION: kubectl supports one minor of skew; unset KUBECTL to use the kubectl built at $K8S_VERSION"
  fi
}

kc() { "$(kubectl_bin)" --kubeconfig "$KUBECONFIG_FILE" --request-timeout=20s "$@"; }

# ctr_cmd runs the cluster's ctr (the host's when the cluster's is not there
# yet, e.g. cluster-down of a half-made cluster).
ctr_cmd() {
  local bin=$CTR
  [[ -x $bin ]] || bin=ctr
  "$bin" --address "$CONTAINERD_SOCKET" --namespace "$CONTAINERD_NAMESPACE" "$@"
}

# with_lock runs "$@" holding the cluster lock, so that two engineers running
# cluster-up/cluster-down at the same time do not interleave.
with_lock() {
  mkdir -p "$(dirname "$LOCK_FILE")"
  exec {LOCK_FD}>"$LOCK_FILE"
  # Exported: hooks run as child scripts inherit the descriptor, and their
  # start_component must close it too, or a daemon they start holds the lock
  # until it exits (the next cluster-down would wait for it).
  export LOCK_FD
  if ! flock -n "$LOCK_FD"; then
    log "another cluster-up/cluster-down holds $LOCK_FILE; waiting (up to 15 min)"
    flock -w 900 "$LOCK_FD" || die "timed out waiting for $LOCK_FILE"
  fi
  "$@"
}

# ---- certificates and kubeconfigs (cluster CA in $PKI_DIR) -----------------

gen_key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; chmod 600 "$1"; }

# gen_cert NAME SUBJECT EKU [SAN]: key + certificate signed by the cluster CA.
gen_cert() {
  local name=$1 subj=$2 eku=$3 san=${4:-}
  gen_key "$PKI_DIR/$name.key"
  openssl req -new -key "$PKI_DIR/$name.key" -subj "$subj" -out "$PKI_DIR/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$PKI_DIR/$name.ext"
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
    -CAcreateserial -days 365 -sha256 -extfile "$PKI_DIR/$name.ext" -out "$PKI_DIR/$name.crt" 2>/dev/null
  rm -f "$PKI_DIR/$name.csr" "$PKI_DIR/$name.ext"
}

# write_kubeconfig FILE CERT_NAME: a kubeconfig with embedded credentials.
write_kubeconfig() {
  local file=$1 cert=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: multinet
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI_DIR/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$PKI_DIR/$cert.crt")
    client-key-data: $(base64 -w0 "$PKI_DIR/$cert.key")
contexts:
- name: multinet
  context:
    cluster: multinet
    user: $cert
current-context: multinet
EOF
  chmod 600 "$file"
}

# client_identity NAME SUBJECT KUBECONFIG: a client certificate NAME for
# SUBJECT signed by the cluster CA (made once) and a kubeconfig using it, for
# components that must reach the API server under their own user.
client_identity() {
  local name=$1 subj=$2 file=$3
  mkdir -p "$(dirname "$file")"
  [[ -f $PKI_DIR/$name.crt ]] || gen_cert "$name" "$subj" clientAuth
  write_kubeconfig "$file" "$name"
}

# ---- processes -------------------------------------------------------------

# start_component NAME CMD... starts CMD in its own session, output to
# $LOG_DIR/NAME.log, PID in $PID_DIR/NAME.pid (and the binary in NAME.exe,
# so a recycled PID is never mistaken for the component). With
# COMPONENT_NS_PID set, CMD runs in the network, mount and UTS namespaces of
# that process (an extra node's holder, hack/lib/nodes.sh; nsenter execs
# CMD, so the PID is still CMD's).
start_component() {
  local name=$1; shift
  local -a ns=()
  [[ -n ${COMPONENT_NS_PID:-} ]] && ns=(nsenter -t "$COMPONENT_NS_PID" -n -m -u --)
  mkdir -p "$LOG_DIR" "$PID_DIR"
  # The subshell closes the lock (daemons must not hold it) and execs, so
  # $! is the component's own PID.
  (
    [[ -n ${LOCK_FD:-} ]] && exec {LOCK_FD}>&-
    exec setsid "${ns[@]}" "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null
  ) &
  local pid=$! exe i
  exe=$(readlink -f "$(command -v "$1")")
  echo "$pid" >"$PID_DIR/$name.pid"
  echo "$exe" >"$PID_DIR/$name.exe"
  # Wait for setsid to exec the binary, so component_alive is meaningful.
  for ((i = 0; i < 50; i++)); do
    [[ $(readlink -f "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] && return 0
    [[ -d /proc/$pid ]] || return 0
    sleep 0.05
  done
}

# component_pid NAME prints the PID of a running component, or fails.
component_pid() {
  local name=$1 pid exe
  [[ -f $PID_DIR/$name.pid ]] || return 1
  pid=$(<"$PID_DIR/$name.pid")
  [[ $pid =~ ^[0-9]+$ ]] && [[ -d /proc/$pid ]] || return 1
  if [[ -f $PID_DIR/$name.exe ]]; then
    exe=$(<"$PID_DIR/$name.exe")
    # "<exe> (deleted)": the binary was rebuilt while it runs (go build
    # replaces the file); still our process, and it must still be stopped.
    case $(readlink -f "/proc/$pid/exe" 2>/dev/null) in
    "$exe" | "$exe (deleted)") ;;
    *) return 1 ;;
    esac
  fi
  pid_running "$pid" || return 1
  echo "$pid"
}

component_alive() { component_pid "$1" >/dev/null; }

# pid_running PID: the process exists and is not a zombie (PID 1 of some
# sandboxes reaps orphans late).
pid_running() {
  [[ -d /proc/$1 ]] && [[ $(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) != Z ]]
}

# stop_pid PID NAME [GRACE]: SIGTERM, wait up to GRACE seconds (default 10),
# then SIGKILL. Prints nothing; returns 0 once the process is gone.
stop_pid() {
  local pid=$1 name=$2 grace=${3:-10} i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < grace * 10; i++)); do
    pid_running "$pid" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) did not stop within ${grace}s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pid_running "$pid" || return 0; sleep 0.1; done
  return 1
}

# explain_failure NAME prints why a component is unhappy: whether it runs,
# its error lines and the tail of its log.
explain_failure() {
  local name=$1 logf=$LOG_DIR/$1.log
  if component_alive "$name"; then
    log "$name is running (pid $(component_pid "$name")); its log: $logf"
  else
    log "$name is NOT running; its log: $logf"
  fi
  [[ -f $logf ]] || { log "  (no log file)"; return 0; }
  local errs
  # The last error lines (at most 6, each cut to 400 characters), then the
  # last lines of the log when they are not among them.
  errs=$(grep -aE '(^E[0-9]{4} |level=error|level=fatal|"level":"(error|fatal)"|[Ff]ailed|[Ee]rror:|panic:|[Ff]atal)' "$logf" |
    tail -n 6 | cut -c1-400 || true)
  if [[ -n $errs ]]; then
    log "  last error lines of $name:"
    sed 's/^/    /' <<<"$errs" >&2
  fi
  local last
  last=$(tail -n 4 "$logf" | cut -c1-400)
  if [[ $last != "$(tail -n 4 <<<"$errs")" ]]; then
    log "  last lines of $name:"
    sed 's/^/    /' <<<"$last" >&2
  fi
}

# wait_until DESC TIMEOUT_SECONDS WATCHED_COMPONENTS CMD...: runs CMD every
# half second until it succeeds. Fails (explaining the watched components,
# a space-separated list) on timeout or as soon as a watched component dies.
wait_until() {
  local desc=$1 timeout=$2 watched=$3; shift 3
  local deadline=$((SECONDS + timeout)) c
  while ! "$@" >/dev/null 2>&1; do
    for c in $watched; do
      if ! component_alive "$c"; then
        log "ERROR: $c exited while waiting for: $desc"
        explain_failure "$c"
        return 1
      fi
    done
    if ((SECONDS >= deadline)); then
      log "ERROR: timed out after ${timeout}s waiting for: $desc"
      for c in $watched; do explain_failure "$c"; done
      return 1
    fi
    sleep 0.5
  done
}

port_in_use() { ss -Hltn "sport = :$1" | grep -q .; }

# ---- dependencies ----------------------------------------------------------

# ensure_packages installs the Debian packages the cluster needs when any is
# missing: apt-get update once, then install. Quick when all are installed.
ensure_packages() {
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and no apt-get to install them"
  log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$MULTINET_ROOT/_output/apt.log" 2>&1 ||
    { tail -n 20 "$MULTINET_ROOT/_output/apt.log" >&2; die "apt-get update failed"; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >>"$MULTINET_ROOT/_output/apt.log" 2>&1 ||
    { tail -n 20 "$MULTINET_ROOT/_output/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
  # The etcd-server package may start its own etcd on the ports we use.
  if command -v service >/dev/null 2>&1 && pgrep -x etcd >/dev/null 2>&1; then
    service etcd stop >/dev/null 2>&1 || true
  fi
}

k8s_ldflags() {
  local v=${K8S_VERSION#v} major minor
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  local pkg flags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "-s -w$flags"
}

# k8s_binary_ok NAME: the cached binary exists and reports $K8S_VERSION.
k8s_binary_ok() {
  local bin=$K8S_BIN_DIR/$1 out
  [[ -x $bin ]] || return 1
  if [[ $1 == kubectl ]]; then
    out=$("$bin" version --client 2>/dev/null) || return 1
  else
    out=$("$bin" --version 2>/dev/null) || return 1
  fi
  [[ $out == *"$K8S_VERSION"* ]]
}

# ensure_k8s_binaries builds the Kubernetes commands (K8S_COMMANDS, kubectl
# among them) at K8S_VERSION from the module proxy (module hack/k8s/v1.<minor>)
# into $K8S_BIN_DIR when missing. Cold: about 15 min on 2 cores.
ensure_k8s_binaries() {
  local n
  [[ -f $K8S_MODULE_DIR/go.mod ]] ||
    die "K8S_VERSION=$K8S_VERSION: no build module $K8S_MODULE_DIR (have: $(cd "$MULTINET_ROOT/hack/k8s" && ls -d v1.* | tr '\n' ' ')); hack/k8s/update.sh $K8S_VERSION writes one"
  grep -q "^require k8s.io/kubernetes $K8S_VERSION\$" "$K8S_MODULE_DIR/go.mod" ||
    die "K8S_VERSION=$K8S_VERSION: $K8S_MODULE_DIR/go.mod builds $(awk '/^require k8s.io\/kubernetes/ {print $3}' "$K8S_MODULE_DIR/go.mod"); hack/k8s/update.sh $K8S_VERSION rewrites it"
  mkdir -p "$K8S_BIN_DIR"
  for n in "${K8S_COMMANDS[@]}"; do
    k8s_binary_ok "$n" && continue
    log "building $n $K8S_VERSION into $K8S_BIN_DIR (first time only; minutes)"
    local t0=$SECONDS
    (cd "$K8S_MODULE_DIR" && go build -trimpath -ldflags "$(k8s_ldflags)" \
      -o "$K8S_BIN_DIR/$n.tmp" "k8s.io/kubernetes/cmd/$n") >"$MULTINET_ROOT/_output/build-$n.log" 2>&1 ||
      { tail -n 30 "$MULTINET_ROOT/_output/build-$n.log" >&2; die "go build of $n failed (log: _output/build-$n.log)"; }
    mv -f "$K8S_BIN_DIR/$n.tmp" "$K8S_BIN_DIR/$n"
    log "built $n in $((SECONDS - t0))s"
  done
}

# ensure_containerd builds containerd, its runc shim and ctr at
# CONTAINERD_VERSION from the module proxy into $CONTAINERD_CACHE_DIR when
# missing (static, without the btrfs snapshotter, as the release tarballs'
# static variant). Cold: about 3 min on 2 cores.
ensure_containerd() {
  local bins=(containerd containerd-shim-runc-v2 ctr) b missing=0
  for b in "${bins[@]}"; do [[ -x $CONTAINERD_CACHE_DIR/$b ]] || missing=1; done
  if ((missing == 0)) && [[ $("$CONTAINERD_CACHE_DIR/containerd" --version 2>/dev/null) == *" $CONTAINERD_VERSION "* ]]; then
    return 0
  fi
  log "building containerd $CONTAINERD_VERSION into $CONTAINERD_CACHE_DIR (first time only; minutes)"
  local t0=$SECONDS m=github.com/containerd/containerd/v2
  mkdir -p "$CONTAINERD_CACHE_DIR"
  (cd "$CONTAINERD_CACHE_DIR" && CGO_ENABLED=0 GOBIN=$CONTAINERD_CACHE_DIR GOFLAGS=-buildvcs=false go install -trimpath \
    -tags no_btrfs -ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION -X $m/version.Revision=module-proxy" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION") \
    >"$MULTINET_ROOT/_output/build-containerd.log" 2>&1 ||
    { tail -n 30 "$MULTINET_ROOT/_output/build-containerd.log" >&2; die "building containerd failed (log: _output/build-containerd.log)"; }
  log "built containerd $CONTAINERD_VERSION in $((SECONDS - t0))s"
}

# ensure_runc builds runc at RUNC_VERSION from the module proxy into
# $RUNC_CACHE_DIR when missing: cgo (runc's nsenter is C) with seccomp, as
# containerd's release notes pair them.
ensure_runc() {
  if [[ $("$RUNC_CACHE_DIR/runc" --version 2>/dev/null | head -n1) == "runc version ${RUNC_VERSION#v}" ]]; then
    return 0
  fi
  log "building runc $RUNC_VERSION into $RUNC_CACHE_DIR (first time only)"
  local t0=$SECONDS
  mkdir -p "$RUNC_CACHE_DIR"
  (cd "$RUNC_CACHE_DIR" && CGO_ENABLED=1 GOBIN=$RUNC_CACHE_DIR GOFLAGS=-buildvcs=false go install -trimpath \
    -tags seccomp -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -X main.gitCommit=module-proxy" \
    "github.com/opencontainers/runc@$RUNC_VERSION") >"$MULTINET_ROOT/_output/build-runc.log" 2>&1 ||
    { tail -n 30 "$MULTINET_ROOT/_output/build-runc.log" >&2; die "building runc failed (log: _output/build-runc.log)"; }
  log "built runc $RUNC_VERSION in $((SECONDS - t0))s"
}

# ensure_cni_plugins builds the reference CNI plugins into $CNI_CACHE_DIR
# when missing (go install of the released module, no replace lines needed),
# statically linked like the release tarballs.
ensure_cni_plugins() {
  local p missing=()
  for p in "${CNI_PLUGINS[@]}"; do [[ -x $CNI_CACHE_DIR/$(basename "$p") ]] || missing+=("$p"); done
  ((${#missing[@]} == 0)) && return 0
  log "building reference CNI plugins $CNI_PLUGINS_VERSION into $CNI_CACHE_DIR"
  mkdir -p "$CNI_CACHE_DIR"
  local pkgs=()
  for p in "${missing[@]}"; do pkgs+=("github.com/containernetworking/plugins/$p@$CNI_PLUGINS_VERSION"); done
  (cd "$CNI_CACHE_DIR" && CGO_ENABLED=0 GOBIN=$CNI_CACHE_DIR GOFLAGS=-buildvcs=false go install -trimpath \
    -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
    "${pkgs[@]}") >"$MULTINET_ROOT/_output/build-cni-plugins.log" 2>&1 ||
    { tail -n 30 "$MULTINET_ROOT/_output/build-cni-plugins.log" >&2; die "building the CNI plugins failed"; }
}

# ensure_tools builds the small Go programs of hack/tools (a module of its
# own) into $TOOLS_DIR
# (always: the Go build cache makes it a second when nothing changed);
# cni-multicall, the k3s layout's multi-call CNI binary, static
# (CGO_ENABLED=0) as the plugins it stands beside.
ensure_tools() {
  mkdir -p "$TOOLS_DIR"
  (cd "$MULTINET_ROOT/hack/tools" && go build -o "$TOOLS_DIR/" ./mkimage ./runc-oomfix &&
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$TOOLS_DIR/" ./cni-multicall) \
    >"$MULTINET_ROOT/_output/build-tools.log" 2>&1 ||
    { cat "$MULTINET_ROOT/_output/build-tools.log" >&2; die "building hack/tools failed"; }
}

# ---- cluster health ---------------------------------------------------------

# apply_smoke_pod NAME [NODE]: the busybox pod default/NAME (pinned to NODE
# when given) that cluster-up waits for to prove a node runs pods with an IP.
apply_smoke_pod() {
  local node_line=""
  [[ -z ${2:-} ]] || node_line="  nodeName: $2"
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
  labels: {app.kubernetes.io/part-of: multinet-cluster-up}
spec:
$node_line
  terminationGracePeriodSeconds: 0
  containers:
  - name: busybox
    image: $IMAGE_REF
    imagePullPolicy: Never
    command: ["sleep", "infinity"]
EOF
}

apiserver_ready() { kc get --raw /readyz >/dev/null 2>&1; }

node_ready() {
  [[ $(kc get node "$(node_name)" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

# deployed_pid NAME [I] prints the host PID of the main process of the I-th
# (default 0) running pod app.kubernetes.io/name=NAME in multinet-system (a
# deployed multinet component), from containerd's task state; fails when
# there is none.
deployed_pid() {
  local id
  id=$(kc -n multinet-system get pods -l "app.kubernetes.io/name=$1" --field-selector=status.phase=Running \
    -o jsonpath="{.items[${2:-0}].status.containerStatuses[0].containerID}" 2>/dev/null) && [[ -n $id ]] || return 1
  cat "$CONTAINERD_DIR/state/io.containerd.runtime.v2.task/k8s.io/${id#containerd://}/init.pid" 2>/dev/null
}

# cluster_healthy: every component runs, the API server is ready and the
# node is Ready.
cluster_healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do component_alive "$c" || return 1; done
  [[ -f $KUBECONFIG_FILE ]] && apiserver_ready && node_ready
}

# load_env sources the env file the last cluster-up wrote (when it exists),
# so that scripts see the mode and paths that cluster actually uses.
load_env() {
  if [[ -f $ENV_FILE ]]; then
    set -a
    # shellcheck disable=SC1090
    . "$ENV_FILE"
    set +a
  fi
}
