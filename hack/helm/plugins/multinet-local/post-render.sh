#!/usr/bin/env bash
# post-render.sh: stdin, the chart's rendered objects; stdout, the same with
# deploy/overlays/local's patches (its *-patch.yaml, strategic merge by
# name) and configs (multinetd.yaml, deviceplugin.yaml, dra-driver.yaml
# replace the data of the chart's ConfigMaps of the same base name), and the
# overlay's cluster dir (/work/main/_output/cluster) rewritten to CLUSTER_DIR.
# Needs MULTINET_ROOT, CLUSTER_DIR and KUSTOMIZE (a command reading a
# kustomization dir: "kubectl kustomize"), as hack/cluster-deployed.sh sets.
set -euo pipefail
: "${MULTINET_ROOT:?}" "${CLUSTER_DIR:?}" "${KUSTOMIZE:?}"
overlay=$MULTINET_ROOT/deploy/overlays/local
tmp=$(mktemp -d "${TMPDIR:-/tmp}/multinet-post-render.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/chart.yaml"
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [chart.yaml]"
  echo "patches:"
  for p in "$overlay"/*-patch.yaml; do
    cp "$p" "$tmp/"
    echo "- path: $(basename "$p")"
  done
  for c in multinetd-config:multinetd.yaml deviceplugin-config:deviceplugin.yaml dra-driver-config:dra-driver.yaml; do
    name=${c%%:*} key=${c#*:}
    jq -n --rawfile v "$overlay/$key" --arg p "/data/$key" '[{op: "replace", path: $p, value: $v}]' >"$tmp/$name.json"
    echo "- path: $name.json"
    echo "  target: {kind: ConfigMap, name: \"$name-[0-9a-f]{10}\"}"
  done
} >"$tmp/kustomization.yaml"
$KUSTOMIZE "$tmp" | sed -e "s#/work/main/_output/cluster#$CLUSTER_DIR#g"
