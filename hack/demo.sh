#!/usr/bin/env bash
# demo.sh: bring the local cluster up, run a plain Deployment pod on the
# default network and show where it runs and its IP. The cluster stays up;
# make cluster-down stops it.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=demo

"$MULTINET_ROOT/hack/cluster-up.sh"
load_env

kc apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: multinet-demo
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: multinet-demo}
  template:
    metadata:
      labels: {app: multinet-demo}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: busybox
        image: $TEST_IMAGE
        imagePullPolicy: Never
        command: ["sleep", "infinity"]
YAML
kc -n default rollout status deployment/multinet-demo --timeout=120s
echo
kc -n default get pods -l app=multinet-demo -o wide
pod=$(kc -n default get pods -l app=multinet-demo -o jsonpath='{.items[0].metadata.name}')
ip=$(kc -n default get pod "$pod" -o jsonpath='{.status.podIP}')
echo
echo "pod default/$pod has IP $ip on the default network ($DEFAULT_NETWORK_NAME, bridge $DEFAULT_NETWORK_BRIDGE, $POD_CIDR)."
echo "Inside the pod:"
kc -n default exec "$pod" -- ip -4 addr show eth0
echo
echo "NOTE: this pod has only the default network. Attaching it to more networks"
echo "(k8s.v1.cni.cncf.io/networks) comes with the meta-plugin issue (multinetd + multinet-shim)."
echo "The cluster stays up: export KUBECONFIG=$KUBECONFIG; make cluster-down stops it."
