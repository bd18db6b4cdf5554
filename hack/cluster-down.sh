#!/usr/bin/env bash
# cluster-down.sh stops the local cluster that hack/cluster-up.sh started and
# leaves nothing behind: every process it started (by PID: SIGTERM, wait,
# SIGKILL), the pods' containers and shims, every mount under _output/cluster
# (kubelet pod volumes, containerd rootfs/shm, network namespaces), the
# bridge and veths, the kubepods cgroups, the host changes recorded by
# cluster-up (sysctls, /etc/hosts line, created directories), and the state
# directory. The component logs are kept in _output/cluster-last-logs/.
#
# It continues past failures and exits non-zero if something is left.
set -uo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/nodes.sh"
LOG_PREFIX=cluster-down

SUMMARY=()
PROBLEMS=()
note() { SUMMARY+=("$*"); }
problem() { PROBLEMS+=("$*"); log "WARNING: $*"; }

stop_component() {
  local name=$1 grace=${2:-10} pid
  if pid=$(component_pid "$name"); then
    if stop_pid "$pid" "$name" "$grace"; then note "stopped $name (pid $pid)"; else problem "$name (pid $pid) still running"; fi
  fi
  rm -f "$PID_DIR/$name.pid" "$PID_DIR/$name.exe"
}

# delete_pods lets the kubelet tear every pod down through the runtime and
# CNI (DEL) while the cluster still runs. The controllers are stopped first so
# nothing is recreated.
delete_pods() {
  component_alive kube-apiserver && component_alive kubelet && component_alive containerd || return 0
  [[ -f $KUBECONFIG_FILE ]] && apiserver_ready || return 0
  stop_component kube-controller-manager
  stop_component kube-scheduler
  local n
  n=$(kc get pods -A --no-headers 2>/dev/null | wc -l)
  ((n > 0)) || return 0
  log "deleting $n pod(s) through the kubelet (CNI DEL runs for each)"
  # The workloads first, while a deployed multinetd still serves their DEL;
  # then multinet's own pods (multinet-system).
  kc delete pods --all -A --field-selector metadata.namespace!=multinet-system \
    --grace-period=1 --wait=true --timeout=45s >/dev/null 2>&1 || true
  if kc delete pods --all -A --grace-period=1 --wait=true --timeout=45s >/dev/null 2>&1; then
    note "deleted $n pod(s) through the kubelet"
  else
    note "not every pod was deleted through the kubelet in 45s; removed the rest through containerd"
  fi
}

# remove_containers stops and removes every container of our containerd
# (pods the kubelet did not get to), so the shims exit.
remove_containers() {
  component_alive containerd || return 0
  local ids id n=0
  ids=$(ctr_cmd tasks list -q 2>/dev/null)
  for id in $ids; do ctr_cmd tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
  for id in $ids; do
    ctr_cmd tasks delete -f "$id" >/dev/null 2>&1 || ctr_cmd tasks delete "$id" >/dev/null 2>&1
    n=$((n + 1))
  done
  ((n > 0)) && note "killed $n leftover container task(s)"
  for id in $(ctr_cmd containers list -q 2>/dev/null); do ctr_cmd containers delete "$id" >/dev/null 2>&1; done
}

# kill_leftover_processes kills the shims of our containerd (found by its
# socket path, which is unique to this cluster) and any process left in the
# kubelet's kubepods cgroups.
kill_leftover_processes() {
  local pid cmd n=0 procs
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCKET" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
  done
  ((n > 0)) && note "killed $n containerd shim(s)"
  n=0
  procs=$(find /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
  for pid in $procs; do kill -KILL "$pid" 2>/dev/null && n=$((n + 1)); done
  ((n > 0)) && note "killed $n process(es) left in kubepods cgroups"
  ((n > 0)) && sleep 1
  return 0
}

# remove_shim_sockets removes the sockets of our shims that containerd 1.6
# keeps at a fixed place, /run/containerd/s/<sha256(address/namespace/id)>
# (a killed shim leaves its socket behind).
remove_shim_sockets() {
  local d id ns sock n=0
  for d in "$CONTAINERD_DIR"/state/io.containerd.runtime.v2.task/*/*/; do
    [[ -d $d ]] || continue
    id=$(basename "$d")
    ns=$(basename "$(dirname "$d")")
    sock=/run/containerd/s/$(printf '%s' "$CONTAINERD_SOCKET/$ns/$id" | sha256sum | cut -d' ' -f1)
    [[ -S $sock ]] && rm -f "$sock" && n=$((n + 1))
  done
  ((n > 0)) && note "removed $n stale shim socket(s) from /run/containerd/s"
  return 0
}

remove_cgroups() {
  local root d n=0
  for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $root ]] || continue
    while read -r d; do rmdir "$d" 2>/dev/null && n=$((n + 1)); done < <(find "$root" -depth -type d)
    [[ -d $root ]] && problem "cgroup $root still exists"
  done
  ((n > 0)) && note "removed $n kubepods cgroup(s)"
  return 0
}

# unmount_all unmounts everything mounted under the cluster directory,
# deepest first; a few passes because shared mounts propagate.
unmount_all() {
  local pass mp n=0 left
  for pass in 1 2 3 4 5; do
    left=$(awk -v d="$CLUSTER_DIR" 'index($5, d"/") == 1 || $5 == d {print $5}' /proc/self/mountinfo | sort -r | uniq)
    [[ -n $left ]] || break
    while read -r mp; do
      [[ -n $mp ]] || continue
      umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null
      n=$((n + 1))
    done <<<"$left"
  done
  ((n > 0)) && note "unmounted $n mount(s) under $CLUSTER_DIR"
  left=$(awk -v d="$CLUSTER_DIR" 'index($5, d"/") == 1 {print $5}' /proc/self/mountinfo)
  [[ -z $left ]] || problem "still mounted: $(echo "$left" | head -n 3 | tr '\n' ' ')"
}

# ns_pids KIND INODE prints the PIDs whose KIND (net, mnt) namespace is
# INODE.
ns_pids() {
  local p
  for p in /proc/[0-9]*; do
    [[ $(stat -L -c %i "$p/ns/$1" 2>/dev/null) == "$2" ]] && echo "${p#/proc/}"
  done
  return 0
}

# stop_extra_node NAME stops node NAME of a multi-node cluster
# (hack/lib/nodes.sh): its kubelet, its containers, containerd and
# kube-proxy, every process left in its cgroups or namespaces, then its
# holder, which ends the namespaces and every mount in them; then it removes
# its cgroups and checks that none of its processes is left.
stop_extra_node() {
  local name=$1 holder net mnt pid n=0 cg h
  stop_component "$name-kubelet" 15
  if component_alive "$name-containerd"; then
    local ids id
    ids=$(node_ctr "$name" tasks list -q 2>/dev/null)
    for id in $ids; do node_ctr "$name" tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
    for id in $ids; do node_ctr "$name" tasks delete -f "$id" >/dev/null 2>&1; done
  fi
  stop_component "$name-containerd"
  stop_component "$name-kube-proxy"
  cg=$NODE_CGROUP_PREFIX$name
  for pid in $(find /sys/fs/cgroup/*/"$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
    kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
  done
  if holder=$(component_pid "$name-holder"); then
    net=$(stat -L -c %i "/proc/$holder/ns/net")
    mnt=$(stat -L -c %i "/proc/$holder/ns/mnt")
    for pid in $(ns_pids net "$net") $(ns_pids mnt "$mnt"); do
      [[ $pid == "$holder" ]] && continue
      kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
    done
    sleep 0.5
    stop_component "$name-holder" 5
    if [[ -n $(ns_pids net "$net") || -n $(ns_pids mnt "$mnt") ]]; then
      problem "node $name: processes left in its namespaces: $(ns_pids net "$net" | head -n 3 | tr '\n' ' ')"
    else
      note "node $name: its namespaces are gone"
    fi
  fi
  ((n > 0)) && note "node $name: killed $n leftover process(es)"
  for h in /sys/fs/cgroup/*/"$cg"; do
    [[ -d $h ]] || continue
    find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
    [[ -d $h ]] && problem "cgroup $h still exists"
  done
  rm -f "$PID_DIR/$name-"*.pid "$PID_DIR/$name-"*.exe
}

# stop_extra_nodes stops nodes 2..N (those with a holder PID file).
stop_extra_nodes() {
  local f name n=0
  for f in "$PID_DIR"/*-holder.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" -holder.pid)
    stop_extra_node "$name"
    n=$((n + 1))
  done
  # cgroups of nodes whose holder was already gone (a crashed run).
  local kind a h
  while read -r kind a _; do
    [[ $kind == cgroup ]] || continue
    for h in /sys/fs/cgroup/*/"$a"; do
      [[ -d $h ]] && { find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null; [[ -d $h ]] && problem "cgroup $h still exists"; }
    done
  done < <(cat "$HOST_RECORD" 2>/dev/null)
  ((n > 0)) && note "stopped $n extra node(s)"
  return 0
}

remove_links() {
  local l n=0
  for l in $(ip -o link show master "$BRIDGE_NAME" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link delete "$l" 2>/dev/null && n=$((n + 1))
  done
  ((n > 0)) && note "deleted $n veth(s) on $BRIDGE_NAME"
  # Links the demo (mnd-*) and the end-to-end tests (mne*, mns*, mnf*) made:
  # their bridges and the macvlan parent; the netdev pool's veths (mnv*,
  # hack/cluster-devices.sh) when its down did not run; the underlay links of
  # a multi-node cluster (mnul0, mnuK; hack/lib/nodes.sh).
  n=0
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^(mnd-|mne|mns|mnf|mnv|mnu)' || true); do
    ip link delete "$l" 2>/dev/null && n=$((n + 1))
  done
  ((n > 0)) && note "deleted $n link(s) of the demo and the tests"
  local br
  for br in "$BRIDGE_NAME" "$NODE_BRIDGE"; do
    if ip link show "$br" >/dev/null 2>&1; then
      ip link delete "$br" && note "deleted bridge $br" || problem "could not delete bridge $br"
    fi
  done
}

# remove_kube_proxy_rules removes kube-proxy's iptables rules and chains
# (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-SVC-*, ...) with kube-proxy --cleanup,
# the way its documentation says to, and checks that none is left.
remove_kube_proxy_rules() {
  local bin=$CACHE_DIR/k8s/${K8S_VERSION:-}/kube-proxy left
  iptables -w 5 -t nat -S 2>/dev/null | grep -q -- '^-N KUBE-' || return 0
  [[ -x $bin ]] || { problem "kube-proxy rules left and no $bin to clean them up"; return 0; }
  "$bin" --cleanup >"$LOG_DIR/kube-proxy-cleanup.log" 2>&1 || true
  left=$(iptables -w 5 -t nat -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-(SERVICES|NODEPORTS|POSTROUTING|MARK-MASQ|SVC-|SEP-)/ {print $2}' | head -n 3)
  if [[ -n $left ]]; then
    problem "kube-proxy --cleanup left iptables chains: $(echo $left) (see $LOG_DIR/kube-proxy-cleanup.log)"
  else
    note "removed kube-proxy's iptables rules (kube-proxy --cleanup)"
  fi
}

# drop_chains CMD TABLE CHAIN...: flushes the chains, then deletes them (so
# that rules of one jumping to another do not block it), adding the number
# deleted to DROPPED; a chain that cannot be deleted is a problem.
DROPPED=0
drop_chains() {
  local cmd=$1 t=$2 c
  shift 2
  for c in "$@"; do "$cmd" -w 5 -t "$t" -F "$c" 2>/dev/null; done
  for c in "$@"; do
    if "$cmd" -w 5 -t "$t" -X "$c" 2>/dev/null; then DROPPED=$((DROPPED + 1)); else problem "could not delete $cmd chain $t/$c"; fi
  done
}

# remove_iptables_chains removes the chains a kubelet creates when
# makeIPTablesUtilChains is on (cluster-up turns it off; this cleans up after
# older runs): the jumps to them first, then the chains.
remove_iptables_chains() {
  local cmd t c found
  DROPPED=0
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    while "$cmd" -w 5 -t filter -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    while "$cmd" -w 5 -t filter -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    for t in mangle nat filter; do
      found=()
      for c in KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-FIREWALL; do
        "$cmd" -w 5 -t "$t" -S "$c" >/dev/null 2>&1 && found+=("$c")
      done
      drop_chains "$cmd" "$t" "${found[@]}"
    done
  done
  ((DROPPED > 0)) && note "removed $DROPPED kubelet iptables chain(s)"
  return 0
}

# remove_cni_chains removes the iptables chains delegates made (portmap's
# CNI-HOSTPORT-*, CNI-DN-*; bridge ipMasq's CNI-<id>; firewall's CNI-FORWARD,
# CNI-ADMIN) and the rules jumping to them, when cluster-up recorded that the
# host had none (cni-iptables-chains in $HOST_RECORD).
remove_cni_chains() {
  grep -qx cni-iptables-chains "$HOST_RECORD" 2>/dev/null || return 0
  local cmd t rule
  DROPPED=0
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for t in nat filter mangle; do
      # Rules of other chains that jump to a CNI- chain, then the chains.
      while read -r rule; do
        [[ -n $rule ]] || continue
        eval "$cmd -w 5 -t $t ${rule/#-A/-D}" 2>/dev/null || problem "could not delete $cmd $t rule: $rule"
      done < <("$cmd" -w 5 -t "$t" -S 2>/dev/null | grep -E -- '^-A [^ ]+ .*-j CNI-' | grep -Ev -- '^-A CNI-')
      # shellcheck disable=SC2046 # one word per chain name
      drop_chains "$cmd" "$t" $("$cmd" -w 5 -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^CNI-/ {print $2}')
    done
  done
  ((DROPPED > 0)) && note "removed $DROPPED iptables chain(s) of the delegates (portmap, ipMasq, firewall)"
  return 0
}

# restore_host undoes what cluster-up recorded in $HOST_RECORD.
restore_host() {
  [[ -f $HOST_RECORD ]] || return 0
  local kind a b rest dirs=()
  while read -r kind a b rest; do
    case $kind in
    sysctl)
      [[ -n $b ]] || continue
      local want="$b${rest:+ $rest}" have
      have=$(sysctl -n "$a" 2>/dev/null | tr '\t' ' ')
      if [[ $have != "$want" ]]; then
        sysctl -qw "$a=$want" >/dev/null 2>&1 && note "restored sysctl $a=$want (was $have)" ||
          problem "could not restore sysctl $a=$want"
      fi
      ;;
    hosts-line)
      if grep -qF "$HOSTS_MARK" /etc/hosts; then
        # /etc/hosts may be a bind mount: rewrite in place, never rename.
        local kept
        kept=$(grep -vF "$HOSTS_MARK" /etc/hosts)
        printf '%s\n' "$kept" >/etc/hosts && note "removed the /etc/hosts line for $b"
      fi
      ;;
    created-dir) dirs+=("$a") ;;
    created-tree)
      # What the delegates left in the node's standard directories
      # (host-local's allocations, tuning's backups, kind's IPAM state).
      if [[ -d $a ]]; then
        rm -rf "$a" && note "removed $a (delegate state)" || problem "could not remove $a"
      fi
      ;;
    root-propagation)
      if [[ $(findmnt -no PROPAGATION /) != "$a" ]]; then
        mount --make-r"$a" / && note "restored the propagation of / to $a" || problem "could not restore the propagation of / to $a"
      fi
      ;;
    esac
  done <"$HOST_RECORD"
  # The kubelet's legacy /var/log/containers symlinks into our pod log dir.
  local l n=0
  for l in /var/log/containers/*.log; do
    [[ -L $l && $(readlink "$l") == "$LOG_DIR/"* ]] && rm -f "$l" && n=$((n + 1))
  done
  ((n > 0)) && note "removed $n symlink(s) from /var/log/containers"
  # The kubelet's fixed device-plugin registration socket.
  rm -f "$DEVICE_PLUGINS_DIR/kubelet.sock" "$DEVICE_PLUGINS_DIR/DEPRECATION"
  local i
  for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
    # Only when empty: another test may have put its own files there.
    [[ -d ${dirs[i]} ]] && rmdir "${dirs[i]}" 2>/dev/null && note "removed ${dirs[i]}"
  done
  return 0
}

down() {
  local t0=$SECONDS
  [[ $(id -u) == 0 ]] || die "must run as root"
  load_env
  if [[ ! -d $CLUSTER_DIR ]] && ! ip link show "$BRIDGE_NAME" >/dev/null 2>&1 && ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1 &&
    ! pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCKET" >/dev/null 2>&1; then
    log "no local cluster found (nothing under $CLUSTER_DIR); nothing to do"
    return 0
  fi

  delete_pods
  if [[ ${CNI_MODE:-bridge} == multinet && -x $MULTINET_CNI_HOOK ]]; then
    MULTINET_CLUSTER_ENV=$ENV_FILE "$MULTINET_CNI_HOOK" down >>"$LOG_DIR/cni-hook.log" 2>&1 ||
      problem "$MULTINET_CNI_HOOK down failed (see $LOG_DIR/cni-hook.log)"
  fi
  stop_extra_nodes
  stop_component kubelet 15
  remove_containers
  stop_component kube-controller-manager
  stop_component kube-scheduler
  stop_component containerd
  kill_leftover_processes
  stop_component kube-proxy
  stop_component kube-apiserver
  stop_component etcd
  # Anything else with a PID file (processes a CNI hook started).
  local f name
  for f in "$PID_DIR"/*.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    stop_component "$name"
  done

  remove_shim_sockets
  unmount_all
  remove_cgroups
  remove_links
  remove_iptables_chains
  remove_kube_proxy_rules
  remove_cni_chains
  restore_host

  if [[ -d $LOG_DIR ]]; then
    rm -rf "$LAST_LOGS_DIR"
    cp -a "$LOG_DIR" "$LAST_LOGS_DIR" 2>/dev/null && note "kept the component logs in $LAST_LOGS_DIR"
  fi
  if [[ -z $(awk -v d="$CLUSTER_DIR" 'index($5, d"/") == 1 {print $5}' /proc/self/mountinfo) ]]; then
    rm -rf "$CLUSTER_DIR" && note "removed $CLUSTER_DIR"
  else
    problem "kept $CLUSTER_DIR: something is still mounted under it"
  fi

  log "summary ($((SECONDS - t0))s):"
  local s
  for s in "${SUMMARY[@]}"; do log "  - $s"; done
  if ((${#PROBLEMS[@]} > 0)); then
    for s in "${PROBLEMS[@]}"; do log "  ! $s"; done
    return 1
  fi
  log "cluster down; nothing left behind"
}

if [[ -n ${MULTINET_CLUSTER_LOCKED:-} ]]; then down; else with_lock down; fi
