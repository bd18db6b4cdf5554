#!/usr/bin/env bash
# govulncheck.sh [DIR]: reports the known vulnerabilities that the code of the
# Go module in DIR (default: multinet's root) can reach, and exits 1 when one is
# not in hack/govulncheck-accepted.txt. make verify runs it.
#
# Offline but for the Go module proxy: govulncheck and the vulnerability
# database both come from it.
#   - govulncheck $GOVULNCHECK_VERSION (golang.org/x/vuln) built into _output/tools;
#   - the database: the OSV reports of golang.org/x/vulndb@$VULNDB_VERSION
#     (data/osv in the module zip), indexed by that module's own cmd/indexdb
#     into a v1 database at $CACHE_DIR/vulndb/$VULNDB_VERSION, read with
#     govulncheck -db file://... (docs/decisions/supply-chain.md).
# Newer reports: bump VULNDB_VERSION to a newer golang.org/x/vulndb pseudo-version.
#
# hack/tools/vulncheck reads govulncheck's JSON and decides: a finding is
# reachable when its trace names a function (symbol level); imported-only and
# required-only ones are listed, not failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GOVULNCHECK_VERSION=v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
CACHE_DIR=${MULTINET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/multinet}
DB=$CACHE_DIR/vulndb/$VULNDB_VERSION
TOOLS=$ROOT/_output/tools
ACCEPTED=${GOVULNCHECK_ACCEPTED:-$ROOT/hack/govulncheck-accepted.txt}
DIR=${1:-$ROOT}

log() { printf 'govulncheck: %s\n' "$*" >&2; }

ensure_govulncheck() {
  if "$TOOLS/govulncheck" -version 2>/dev/null | grep -q "govulncheck@$GOVULNCHECK_VERSION\$"; then return 0; fi
  log "building govulncheck $GOVULNCHECK_VERSION into _output/tools"
  GOBIN=$TOOLS go install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"
}

ensure_vulncheck() {
  go -C "$ROOT/hack/tools" build -o "$TOOLS/vulncheck" ./vulncheck
}

# ensure_vulndb builds the v1 database from golang.org/x/vulndb's OSV files
# once per VULNDB_VERSION (about 40 MB, 5 s; indexdb's first build about a
# minute), into a temporary directory renamed into place.
ensure_vulndb() {
  [[ -s $DB/index/modules.json && -s $DB/index/db.json ]] && return 0
  log "building the vulnerability database golang.org/x/vulndb@$VULNDB_VERSION into $DB"
  mkdir -p "$TOOLS" "$(dirname "$DB")"
  local src
  src=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d $src/data/osv ]] || { log "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv (at '$src')"; exit 1; }
  GOBIN=$TOOLS go install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
  local tmp=$DB.tmp.$$
  rm -rf "$tmp"
  "$TOOLS/indexdb" -vulns "$src/data/osv" -out "$tmp"
  rm -rf "$DB"
  mv "$tmp" "$DB"
}

# scan_key hashes what govulncheck's answer depends on: the Go toolchain,
# the scanner and database versions, and every Go file, go.mod and go.sum
# of DIR's module.
scan_key() {
  {
    go version
    echo "$GOVULNCHECK_VERSION $VULNDB_VERSION"
    find . -path ./_output -prune -o -path ./.git -prune -o -path ./hack/testdata -prune -o \
      \( -name '*.go' -o -name go.mod -o -name go.sum \) -type f -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-32
}

mkdir -p "$TOOLS"
ensure_govulncheck
ensure_vulncheck
ensure_vulndb
cd "$DIR"
# The scan takes a minute or more; its JSON is kept per scan_key in
# _output/govulncheck, so an unchanged tree is judged again (against the
# current accepted file) without scanning.
SCANS=$ROOT/_output/govulncheck
key=$(scan_key)
scan=$SCANS/$key.json
if [[ ! -s $scan ]]; then
  mkdir -p "$SCANS"
  "$TOOLS/govulncheck" -db "file://$DB" -format json ./... >"$scan.tmp" || { rm -f "$scan.tmp"; exit 2; }
  mv "$scan.tmp" "$scan"
  find "$SCANS" -name '*.json' ! -name "$key.json" -mmin +1440 -delete
fi
"$TOOLS/vulncheck" -accepted "$ACCEPTED" -db "golang.org/x/vulndb@$VULNDB_VERSION" <"$scan"
