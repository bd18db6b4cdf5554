#!/usr/bin/env bash
# images.sh (make images): builds multinet's container images without a
# container engine and, on the local cluster, imports them into containerd.
#
#   1. static binaries (CGO_ENABLED=0, -trimpath, version stamped) of
#      multinetd, multinet-delegate-launcher, multinet-shim, multinet-netdev, multinet-ipam, multinet-install,
#      multinet-webhook, multinet-deviceplugin and multinet-dra-driver into
#      _output/images/bin;
#   2. an SBOM of each binary, CycloneDX JSON from its Go build information
#      (cyclonedx-gomod $CYCLONEDX_GOMOD_VERSION, from the Go module proxy,
#      built into _output/tools), into _output/images/sbom/<binary>.cdx.json;
#   3. hack/tools/images: one OCI image each, from scratch, written as
#      docker-archive tarballs _output/images/{multinetd,webhook,deviceplugin,dra-driver}.tar,
#      each carrying its binaries' SBOMs at /usr/share/sbom/<binary>.cdx.json,
#      the list _output/images/images.txt ("<name> <ref>") and
#      _output/images/digests.txt ("<name> <repo>/<name>@sha256:..."; make
#      manifests IMAGE_DIGESTS=_output/images/digests.txt pins them);
#   4. IMPORT=1 (or IMPORT=auto, the default, when the local cluster's
#      containerd answers): ctr -n k8s.io images import of each tarball.
#
# Environment:
#   IMAGE_REPO   repository prefix (default localhost/multinet): <repo>/multinetd:<tag>
#   IMAGE_TAG    tag (default: the VERSION file, else `git describe --always --dirty`)
#   EXTRA_TAGS   more tags on the same images (default "dev", which
#                deploy/overlays/local refers to); "" for none
#   IMPORT       1 | 0 | auto (default auto)
#   GOARCH       target architecture (default: the host's)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output/images
BIN=$OUT/bin
TOOLS=$ROOT/_output/tools
IMAGE_REPO=${IMAGE_REPO:-localhost/multinet}
EXTRA_TAGS=${EXTRA_TAGS-dev}
IMPORT=${IMPORT:-auto}
GOARCH=${GOARCH:-$(go env GOARCH)}

log() { printf '%s [images] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# image_tag prints the tag: VERSION, else git describe; characters a tag
# may not hold ([A-Za-z0-9_.-], 128 at most) become '-'.
image_tag() {
  local t
  if [[ -n ${IMAGE_TAG:-} ]]; then
    t=$IMAGE_TAG
  elif [[ -s VERSION ]]; then
    t=$(head -n1 VERSION)
  else
    t=$(git describe --always --dirty 2>/dev/null || echo dev)
  fi
  t=$(printf '%s' "$t" | tr -c 'A-Za-z0-9_.-' '-')
  [[ $t =~ ^[A-Za-z0-9_] ]] || t="v$t"
  printf '%s' "${t:0:128}"
}

TAG=$(image_tag)
# The default image set of hack/tools/images (its Specs), imported below.
IMAGES=(multinetd webhook deviceplugin dra-driver)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
mkdir -p "$BIN" "$TOOLS"

log "building static binaries ($GOARCH, version $TAG) into ${BIN#"$ROOT"/}"
t0=$SECONDS
# -tags grpcnotrace: gRPC without golang.org/x/net/trace, whose templates
# (reflect method lookups) keep every exported method of every type alive:
# 12 MB less in multinetd (docs/bench.md "Binary size").
CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH go build -trimpath -tags grpcnotrace \
  -ldflags "-s -w -X main.version=$TAG -X github.com/multinet/multinet/internal/process/version.Version=$TAG" -o "$BIN/" \
  ./cmd/multinetd ./cmd/multinet-delegate-launcher ./cmd/multinet-shim ./cmd/multinet-netdev ./cmd/multinet-ipam ./cmd/multinet-install \
  ./cmd/multinet-webhook ./cmd/multinet-ipam-cleanup ./cmd/multinet-deviceplugin ./cmd/multinet-dra-driver
log "binaries built in $((SECONDS - t0))s"

CYCLONEDX_GOMOD_VERSION=v1.10.0
if ! "$TOOLS/cyclonedx-gomod" version 2>/dev/null | grep -q "${CYCLONEDX_GOMOD_VERSION#v}"; then
  log "building cyclonedx-gomod $CYCLONEDX_GOMOD_VERSION into ${TOOLS#"$ROOT"/}"
  GOBIN=$TOOLS go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
fi
SBOM=$OUT/sbom
rm -rf "$SBOM" && mkdir -p "$SBOM"
for b in "$BIN"/*; do
  # bin: the modules linked into the binary, from its build information
  # (what runs, not what go.mod lists); -version names the main component.
  "$TOOLS/cyclonedx-gomod" bin -json -version "$TAG" -output "$SBOM/$(basename "$b").cdx.json" "$b" 2>/dev/null ||
    die "cyclonedx-gomod bin $b failed"
done
log "SBOMs (CycloneDX) of $(find "$SBOM" -name '*.cdx.json' | wc -l) binaries in ${SBOM#"$ROOT"/}"

go -C hack/tools build -o "$TOOLS/images" ./images
tags=$TAG
for t in $EXTRA_TAGS; do [[ $t == "$TAG" ]] || tags+=",$t"; done
"$TOOLS/images" -bin-dir "$BIN" -sbom-dir "$SBOM" -out-dir "$OUT" -repo "$IMAGE_REPO" -tags "$tags" \
  -version "$TAG" -revision "$REVISION" -arch "$GOARCH"

# containerd_up says whether the local cluster's containerd answers.
containerd_up() {
  [[ -f $ROOT/_output/cluster/env ]] || return 1
  # shellcheck disable=SC1091
  (set -a && . "$ROOT/_output/cluster/env" && [[ -S $CONTAINERD_SOCKET ]] &&
    "${CTR:-ctr}" --address "$CONTAINERD_SOCKET" version >/dev/null 2>&1)
}

case $IMPORT in
1 | true | yes) containerd_up || die "IMPORT=1 but the local cluster's containerd does not answer (make cluster-up)" ;;
auto) containerd_up || { log "local cluster not running: not importing (IMPORT=1 to insist)"; exit 0; } ;;
*) exit 0 ;;
esac
# shellcheck disable=SC1091
set -a && . "$ROOT/_output/cluster/env" && set +a
for name in "${IMAGES[@]}"; do
  "${CTR:-ctr}" --address "$CONTAINERD_SOCKET" -n "$CONTAINERD_NAMESPACE" images import \
    "$OUT/$name.tar" >/dev/null || die "ctr images import $OUT/$name.tar failed"
done
log "imported into containerd ($CONTAINERD_NAMESPACE): $(awk '{print $2}' "$OUT/images.txt" | tr '\n' ' ')"
# The extra nodes of a multi-node cluster (NODES > 1, hack/lib/nodes.sh) each
# run their own containerd: the images go into every one.
if [[ -s ${NODES_FILE:-} ]]; then
  while read -r node _ _ holder _; do
    [[ $holder == - ]] && continue
    # (During cluster-up the node's containerd starts later and imports them itself.)
    [[ -S $MULTINET_CLUSTER_DIR/nodes/$node/containerd/containerd.sock ]] || continue
    for name in "${IMAGES[@]}"; do
      "${CTR:-ctr}" --address "$MULTINET_CLUSTER_DIR/nodes/$node/containerd/containerd.sock" -n "$CONTAINERD_NAMESPACE" \
        images import "$OUT/$name.tar" >/dev/null || die "node $node: ctr images import $OUT/$name.tar failed"
    done
    log "imported into node $node's containerd"
  done <"$NODES_FILE"
fi
