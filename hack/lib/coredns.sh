# shellcheck shell=bash
# Cluster DNS of the local cluster: CoreDNS built from the Go module proxy
# (no image registry is reachable), packed into a one-layer image by
# hack/tools/images, imported into the cluster's containerd and run as the
# kube-system Deployment coredns behind the Service kube-dns
# (hack/coredns/coredns.yaml).
#
# Source it after hack/lib/cluster.sh (it uses CACHE_DIR, MULTINET_ROOT,
# TOOLS_DIR, LOG_DIR, KUBECONFIG_FILE, log, die, kc, kubectl_bin and
# ctr_cmd). It defines variables and functions and starts nothing:
#
#   ensure_coredns   builds the coredns binary and its image tarball into
#                    $COREDNS_CACHE_DIR when missing (cold: minutes); needs
#                    neither the cluster nor root.
#   deploy_coredns   imports and pins the image in containerd, applies the
#                    manifest and waits for the Deployment to be available.
#                    The kubelet must already run with clusterDNS
#                    [$DNS_SERVICE_IP] and clusterDomain $CLUSTER_DOMAIN.

COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
COREDNS_IMAGE=localhost/multinet/coredns:$COREDNS_VERSION
DNS_SERVICE_IP=${DNS_SERVICE_IP:-10.96.0.10}
CLUSTER_DOMAIN=cluster.local
COREDNS_CACHE_DIR=$CACHE_DIR/coredns/$COREDNS_VERSION
COREDNS_BIN=$COREDNS_CACHE_DIR/coredns
COREDNS_IMAGE_TAR=$COREDNS_CACHE_DIR/coredns-image.tar
COREDNS_MANIFEST=$MULTINET_ROOT/hack/coredns/coredns.yaml
COREDNS_ROLLOUT_TIMEOUT=${COREDNS_ROLLOUT_TIMEOUT:-120}

# coredns_binary_ok: the cached binary runs and reports $COREDNS_VERSION
# ("CoreDNS-1.15.0" on its first line).
coredns_binary_ok() {
  [[ -x $COREDNS_BIN ]] || return 1
  [[ $("$COREDNS_BIN" -version 2>/dev/null | head -n1) == "CoreDNS-${COREDNS_VERSION#v}" ]]
}

# ensure_coredns builds, when missing, the static coredns binary (go install
# of the released module, which has no replace directives) and the image
# tarball $COREDNS_IMAGE_TAR holding $COREDNS_IMAGE. Cold: several minutes
# on 2 cores; a second when both are cached.
ensure_coredns() {
  local build_log=$MULTINET_ROOT/_output/build-coredns.log t0
  mkdir -p "$COREDNS_CACHE_DIR" "$MULTINET_ROOT/_output"
  if ! coredns_binary_ok; then
    log "building coredns $COREDNS_VERSION into $COREDNS_CACHE_DIR (first time only; minutes)"
    t0=$SECONDS
    # Into a scratch GOBIN, then renamed: an interrupted build never leaves
    # a partial binary where the cache check looks.
    local gobin=$COREDNS_CACHE_DIR/.gobin
    rm -rf "$gobin"
    (cd "$COREDNS_CACHE_DIR" && CGO_ENABLED=0 GOBIN=$gobin GOFLAGS=-buildvcs=false go install -trimpath \
      -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION") >"$build_log" 2>&1 ||
      { tail -n 30 "$build_log" >&2; die "building coredns $COREDNS_VERSION failed (go install github.com/coredns/coredns@$COREDNS_VERSION; log: _output/build-coredns.log)"; }
    mv -f "$gobin/coredns" "$COREDNS_BIN"
    rm -rf "$gobin"
    coredns_binary_ok ||
      die "the coredns just built ($COREDNS_BIN) does not report version ${COREDNS_VERSION#v}: $("$COREDNS_BIN" -version 2>&1 | head -n1)"
    # A new binary needs a new image.
    rm -f "$COREDNS_IMAGE_TAR"
    log "built coredns $COREDNS_VERSION in $((SECONDS - t0))s"
  fi
  [[ -s $COREDNS_IMAGE_TAR && $COREDNS_IMAGE_TAR -nt $COREDNS_BIN ]] && return 0
  local image_log=$MULTINET_ROOT/_output/build-coredns-image.log
  local repo=${COREDNS_IMAGE%/*} tag=${COREDNS_IMAGE##*:} out=$COREDNS_CACHE_DIR/.image
  log "building image $COREDNS_IMAGE into $COREDNS_IMAGE_TAR"
  mkdir -p "$TOOLS_DIR"
  go -C "$MULTINET_ROOT/hack/tools" build -o "$TOOLS_DIR/images" ./images >"$image_log" 2>&1 ||
    { tail -n 30 "$image_log" >&2; die "building hack/tools/images failed (log: _output/build-coredns-image.log)"; }
  rm -rf "$out"
  # -images coredns: the binaries directory holds coredns only.
  "$TOOLS_DIR/images" -images coredns -bin-dir "$COREDNS_CACHE_DIR" -out-dir "$out" \
    -repo "$repo" -tags "$tag" -version "$COREDNS_VERSION" -source https://github.com/coredns/coredns \
    >>"$image_log" 2>&1 ||
    { tail -n 30 "$image_log" >&2; die "building image $COREDNS_IMAGE failed (log: _output/build-coredns-image.log)"; }
  mv -f "$out/coredns.tar" "$COREDNS_IMAGE_TAR"
  rm -rf "$out"
  # The tool's table: IMAGE UNCOMPRESSED COMPRESSED TARBALL IMAGE-ID.
  log "built image $COREDNS_IMAGE: $(awk '$1 == "'"$COREDNS_IMAGE"'" {print $2, $3, "uncompressed,", $4, $5, "compressed"}' "$image_log")"
}

# render_coredns_manifest prints hack/coredns/coredns.yaml with its
# placeholders (@DNS_SERVICE_IP@, @CLUSTER_DOMAIN@, @COREDNS_IMAGE@) filled in.
render_coredns_manifest() {
  [[ $DNS_SERVICE_IP =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "DNS_SERVICE_IP=$DNS_SERVICE_IP: not an IPv4 address"
  [[ $CLUSTER_DOMAIN =~ ^[a-z0-9.-]+$ ]] || die "CLUSTER_DOMAIN=$CLUSTER_DOMAIN: not a domain name"
  [[ $COREDNS_IMAGE =~ ^[A-Za-z0-9._/:-]+$ ]] || die "COREDNS_IMAGE=$COREDNS_IMAGE: not an image reference"
  local out
  out=$(sed -e "s|@DNS_SERVICE_IP@|$DNS_SERVICE_IP|g" -e "s|@CLUSTER_DOMAIN@|$CLUSTER_DOMAIN|g" \
    -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|g" "$COREDNS_MANIFEST") || die "cannot read $COREDNS_MANIFEST"
  [[ $out != *@[A-Z_]*@* ]] || die "$COREDNS_MANIFEST: a placeholder is left unfilled: $(grep -o '@[A-Z_]*@' <<<"$out" | sort -u | tr '\n' ' ')"
  printf '%s\n' "$out"
}

# coredns_explain prints why CoreDNS is not available: the Deployment's and
# the pods' state, each pod's Events and its containers' logs (the previous
# run's too, after a restart).
coredns_explain() {
  local pods p
  log "kube-system/coredns:"
  kc -n kube-system get deploy/coredns -o wide >&2 || true
  kc -n kube-system get pods -l k8s-app=kube-dns -o wide >&2 || true
  pods=$(kc -n kube-system get pods -l k8s-app=kube-dns -o name 2>/dev/null || true)
  if [[ -z $pods ]]; then
    # No pod: the ReplicaSet could not create one (admission, quota, ...).
    log "no coredns pod; the Deployment's and ReplicaSets' events:"
    kc -n kube-system describe deploy/coredns 2>/dev/null | sed -n '/^Events:/,$p' >&2 || true
    kc -n kube-system get events --field-selector involvedObject.kind=ReplicaSet 2>/dev/null |
      grep -E '^LAST|coredns' >&2 || true
    return 0
  fi
  for p in $pods; do
    log "$p: state and Events:"
    kc -n kube-system describe "$p" 2>/dev/null |
      sed -n -e '/^    State:/,/^    Ready:/p' -e '/^Events:/,$p' >&2 || true
    log "$p: logs:"
    kc -n kube-system logs "$p" --all-containers --tail=40 >&2 2>&1 || true
    if kc -n kube-system logs "$p" --all-containers --previous --tail=40 >/dev/null 2>&1; then
      log "$p: logs of the previous run:"
      kc -n kube-system logs "$p" --all-containers --previous --tail=40 >&2 || true
    fi
  done
}

# deploy_coredns imports $COREDNS_IMAGE_TAR (ensure_coredns first) into the
# cluster's containerd, pins the image (the manifest says imagePullPolicy
# Never, so the kubelet's image garbage collector must not remove it),
# applies the manifest and waits up to $COREDNS_ROLLOUT_TIMEOUT seconds for
# the Deployment's rollout.
deploy_coredns() {
  [[ -s $COREDNS_IMAGE_TAR ]] || die "no CoreDNS image tarball $COREDNS_IMAGE_TAR (call ensure_coredns first)"
  mkdir -p "$LOG_DIR"
  ctr_cmd images import "$COREDNS_IMAGE_TAR" >"$LOG_DIR/coredns-image-import.log" 2>&1 ||
    { cat "$LOG_DIR/coredns-image-import.log" >&2; die "ctr images import of $COREDNS_IMAGE ($COREDNS_IMAGE_TAR) failed"; }
  ctr_cmd images label "$COREDNS_IMAGE" io.cri-containerd.pinned=pinned >/dev/null 2>&1 ||
    die "ctr images label $COREDNS_IMAGE io.cri-containerd.pinned=pinned failed (was the image imported under another name?)"
  local manifest
  manifest=$(render_coredns_manifest) || exit 1
  kc apply -f - <<<"$manifest" >"$LOG_DIR/coredns-apply.log" 2>&1 ||
    { cat "$LOG_DIR/coredns-apply.log" >&2; die "kubectl apply of $COREDNS_MANIFEST failed"; }
  log "waiting (up to ${COREDNS_ROLLOUT_TIMEOUT}s) for kube-system/coredns ($COREDNS_IMAGE, Service kube-dns $DNS_SERVICE_IP)"
  local t0=$SECONDS
  # kc's --request-timeout would cut rollout status's watch; the last
  # --request-timeout wins, and timeout(1) bounds the whole wait anyway.
  if ! timeout $((COREDNS_ROLLOUT_TIMEOUT + 15)) "$(kubectl_bin)" --kubeconfig "$KUBECONFIG_FILE" \
    --request-timeout=$((COREDNS_ROLLOUT_TIMEOUT + 5))s -n kube-system rollout status deploy/coredns \
    --timeout="${COREDNS_ROLLOUT_TIMEOUT}s" >"$LOG_DIR/coredns-rollout.log" 2>&1; then
    cat "$LOG_DIR/coredns-rollout.log" >&2
    coredns_explain
    die "CoreDNS (kube-system/coredns) did not become available within ${COREDNS_ROLLOUT_TIMEOUT}s (see its Events and logs above)"
  fi
  log "CoreDNS available in $((SECONDS - t0))s: kube-dns $DNS_SERVICE_IP, domain $CLUSTER_DOMAIN"
}
