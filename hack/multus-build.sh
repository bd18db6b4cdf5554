#!/usr/bin/env bash
# multus-build.sh (make multus-build): builds Multus thick's multus-daemon and
# multus-shim at MULTUS_VERSION (default v4.3.0) from the Go module proxy into
# the cache ($CACHE_DIR/multus/<version>, like the other cached builds of
# hack/lib/cluster.sh) and prints that directory. Quick when both binaries are
# there. Optional: only `make bench MULTUS_BIN_DIR=<dir>` uses them, to measure
# Multus thick side by side with multinet (docs/bench.md). Cold: 2-4 min.
#
# The module is gopkg.in/k8snetworkplumbingwg/multus-cni.v4; `go install
# pkg@version` does not work for it (the proxy serves no version list for the
# gopkg.in path), so a throwaway module requires it and `go build` builds the
# two commands.
set -euo pipefail

# shellcheck source=hack/lib/cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
LOG_PREFIX=multus-build

MULTUS_VERSION=${MULTUS_VERSION:-v4.3.0}
MODULE=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
OUT=$CACHE_DIR/multus/$MULTUS_VERSION

if [[ -x $OUT/multus-daemon && -x $OUT/multus-shim ]]; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$OUT" "$MULTINET_ROOT/_output"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/go.mod" <<EOF
module multusbuild

go 1.26
EOF
cat >"$work/tools.go" <<EOF
//go:build tools

package multusbuild

import (
	_ "$MODULE/cmd/multus-daemon"
	_ "$MODULE/cmd/multus-shim"
)
EOF
log "building Multus thick $MULTUS_VERSION (multus-daemon, multus-shim) into $OUT (first time only; minutes)"
t0=$SECONDS
build_log=$MULTINET_ROOT/_output/build-multus.log
(cd "$work" && GOFLAGS=-mod=mod go get "$MODULE@$MULTUS_VERSION" &&
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$OUT/" \
    "$MODULE/cmd/multus-daemon" "$MODULE/cmd/multus-shim") >"$build_log" 2>&1 ||
  { tail -n 30 "$build_log" >&2; die "building Multus $MULTUS_VERSION failed (log: _output/build-multus.log)"; }
log "built Multus $MULTUS_VERSION in $((SECONDS - t0))s"
echo "$OUT"
