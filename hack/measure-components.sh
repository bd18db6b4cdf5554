#!/usr/bin/env bash
# measure-components.sh [N] (make measure): memory and CPU of each deployed
# multinet component (multinetd and its delegate launcher, multinet-webhook,
# multinet-deviceplugin, multinet-dra-driver) on
# the local cluster while N pods (default 50) with two extra networks each
# (three attachments) start, run and go away. Prints a table; changes
# nothing it does not remove again.
#
# How: a Deployment of N busybox pods selecting two bridge + host-local
# networks in namespace multinet-measure. Each component's main process is
# found through its pod's container (containerd's init.pid; multinetd's
# launcher is the child of multinetd run with --nodeexec-launcher); every
# second the script reads its RSS (VmRSS of /proc/PID/status; at the end of
# a phase also its split RssAnon / RssFile: heap and stacks against the
# binary's mapped file pages) and CPU time
# (utime + stime of /proc/PID/stat, plus its waited-for children's: the
# delegate plugins multinetd runs). Phases: idle (10 s), scale-up (from
# the apply until all N pods are Ready), steady (10 s with N pods), scale-down
# (until the pods are gone). CPU is the time used in a phase; "cores" is
# that over the phase's wall time.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=measure
load_env

N=${1:-50}
NS=multinet-measure
# The webhook runs two replicas: each is measured (multinet-webhook#0, #1).
COMPONENTS=(multinetd multinetd-launcher "multinet-webhook#0" "multinet-webhook#1" multinet-deviceplugin multinet-dra-driver)
CLK_TCK=$(getconf CLK_TCK)

apiserver_ready || die "the local cluster does not answer: make cluster-up"
kc -n multinet-system get daemonset multinetd >/dev/null 2>&1 ||
  die "multinet is not deployed on this cluster (MULTINET_DEPLOY=host?): hack/cluster-deployed.sh up"

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# rss_split prints "ANON/FILE" in MiB (RssAnon, RssFile + RssShmem).
rss_split() { awk '/^RssAnon:/ {a = $2} /^Rss(File|Shmem):/ {f += $2} END {printf "%.1f/%.1f", a / 1024, f / 1024}' "/proc/$1/status"; }
# utime + stime of the process and of its waited-for children (cutime +
# cstime): multinetd's delegates are its children, so their CPU counts.
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }

declare -A PID PEAK CPU0 PHASE_CPU PHASE_RSS PHASE_SPLIT
for c in "${COMPONENTS[@]}"; do
  idx=0
  [[ $c == *#* ]] && idx=${c#*#}
  if [[ $c == multinetd-launcher ]]; then
    # multinetd's child in the node cgroup (nodeexec.Launcher).
    PID[$c]=$(pgrep -P "${PID[multinetd]}" -f -- '--nodeexec-launcher$' | head -n1) ||
      die "multinetd (pid ${PID[multinetd]}) has no delegate launcher child"
  else
    PID[$c]=$(deployed_pid "${c%#*}" "$idx") || die "$c: no running pod in multinet-system"
  fi
  [[ -r /proc/${PID[$c]}/status ]] || die "$c: no process ${PID[$c]}"
done

phase_start() {
  for c in "${COMPONENTS[@]}"; do
    CPU0[$c]=$(cpu_ticks "${PID[$c]}")
    PEAK[$c]=$(rss_kib "${PID[$c]}")
  done
  T0=$(date +%s.%N)
}
sample() {
  local c r
  for c in "${COMPONENTS[@]}"; do
    r=$(rss_kib "${PID[$c]}")
    ((r > PEAK[$c])) && PEAK[$c]=$r
  done
}
phase_end() { # phase_end NAME
  local c wall
  wall=$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN {print a - b}')
  PHASE_WALL[$1]=$wall
  for c in "${COMPONENTS[@]}"; do
    PHASE_CPU[$1,$c]=$(($(cpu_ticks "${PID[$c]}") - CPU0[$c]))
    PHASE_RSS[$1,$c]="$(rss_kib "${PID[$c]}") ${PEAK[$c]}"
    PHASE_SPLIT[$1,$c]=$(rss_split "${PID[$c]}")
  done
}
declare -A PHASE_WALL
wait_phase() { # wait_phase SECONDS CONDITION...: samples until the condition holds or the time ends
  local limit=$1 start=$SECONDS
  shift
  while ((SECONDS - start < limit)); do
    sample
    "$@" && return 0
    sleep 1
  done
  return 1
}
never() { return 1; }

cleanup() {
  kc delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  ip link del mnemeas1 2>/dev/null || true
  ip link del mnemeas2 2>/dev/null || true
  rm -rf "$CNI_IPAM_DIR/measure"
}
trap cleanup EXIT

# A previous run's namespace may still be terminating.
kc delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
kc create namespace "$NS" >/dev/null
# Its NADs name node bridges and a dataDir: trusted as an admin would
# (docs/nad-trust.md).
kc label namespace "$NS" multinet.io/nad-trust=unrestricted >/dev/null
for i in 1 2; do
  kc apply -f - >/dev/null <<YAML
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: net$i, namespace: $NS}
spec:
  config: '{"cniVersion":"1.0.0","name":"net$i","plugins":[{"type":"bridge","bridge":"mnemeas$i","ipam":{"type":"host-local","dataDir":"$CNI_IPAM_DIR/measure/net$i","ranges":[[{"subnet":"10.213.$i.0/24"}]]}}]}'
YAML
done
sleep 2 # the webhook's informer sees the NADs

log "idle: 10 s"
phase_start
wait_phase 10 never || true
phase_end idle

log "scale-up: $N pods with 2 extra networks each"
phase_start
kc apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: measure, namespace: $NS}
spec:
  replicas: $N
  selector: {matchLabels: {app: measure}}
  template:
    metadata:
      labels: {app: measure}
      annotations: {k8s.v1.cni.cncf.io/networks: "net1,net2"}
    spec:
      # Not 0: a pod deleted with grace 0 leaves the API at once, before
      # the kubelet has torn its networks down.
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: $TEST_IMAGE, imagePullPolicy: Never, command: [sleep, "3600"]}
YAML
ready() { [[ $(kc -n "$NS" get deployment measure -o jsonpath='{.status.readyReplicas}') == "$N" ]]; }
wait_phase 600 ready || die "$N pods not Ready in 600 s: $(kc -n "$NS" get pods --no-headers | awk '{print $3}' | sort | uniq -c | tr '\n' ' ')"
phase_end up
attachments=$(kc -n "$NS" get pods -o json | jq '[.items[].metadata.annotations["k8s.v1.cni.cncf.io/network-status"] | fromjson | length] | add')

log "steady: 10 s with $N pods ($attachments attachments)"
phase_start
wait_phase 10 never || true
phase_end steady

log "scale-down"
phase_start
kc -n "$NS" delete deployment measure --wait=false >/dev/null
# Gone from the API and torn down: no port left on the two bridges.
gone() {
  local out
  out=$(kc -n "$NS" get pods -o name) && [[ -z $out ]] &&
    [[ -z $(ip -o link show master mnemeas1 2>/dev/null) && -z $(ip -o link show master mnemeas2 2>/dev/null) ]]
}
wait_phase 600 gone || die "pods not gone in 600 s"
phase_end down

printf '\n%d pods, %s attachments (eth0 + 2 bridge networks each); binary size in MB (of /proc/PID/exe); RSS in MiB (at the end of the phase / peak; idle and steady also anon/file: RssAnon / RssFile), CPU in seconds (cores = CPU / wall)\n\n' "$N" "$attachments"
printf '| component | binary MB | idle RSS (anon/file) | scale-up (%.0f s) RSS end/peak, CPU s (cores) | steady RSS (anon/file), cores | scale-down (%.0f s) RSS end/peak, CPU s (cores) |\n' "${PHASE_WALL[up]}" "${PHASE_WALL[down]}"
printf '|---|---|---|---|---|---|\n'
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
cores() { awk -v t="$1" -v hz="$CLK_TCK" -v w="$2" 'BEGIN {printf "%.2f s (%.3f)", t / hz, t / hz / w}'; }
for c in "${COMPONENTS[@]}"; do
  read -r ie _ <<<"${PHASE_RSS[idle,$c]}"
  read -r ue up <<<"${PHASE_RSS[up,$c]}"
  read -r se _ <<<"${PHASE_RSS[steady,$c]}"
  read -r de dp <<<"${PHASE_RSS[down,$c]}"
  size=$(stat -Lc %s "/proc/${PID[$c]}/exe" | awk '{printf "%.1f", $1 / 1e6}')
  printf '| %s | %s | %s (%s) | %s / %s, %s | %s (%s), %s | %s / %s, %s |\n' "$c" "$size" "$(mib "$ie")" "${PHASE_SPLIT[idle,$c]}" \
    "$(mib "$ue")" "$(mib "$up")" "$(cores "${PHASE_CPU[up,$c]}" "${PHASE_WALL[up]}")" \
    "$(mib "$se")" "${PHASE_SPLIT[steady,$c]}" "$(cores "${PHASE_CPU[steady,$c]}" "${PHASE_WALL[steady]}")" \
    "$(mib "$de")" "$(mib "$dp")" "$(cores "${PHASE_CPU[down,$c]}" "${PHASE_WALL[down]}")"
done
