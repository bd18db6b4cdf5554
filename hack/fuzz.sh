#!/usr/bin/env bash
# fuzz.sh runs every Fuzz target of the module for $FUZZTIME (default 30s)
# each, one at a time. New crashers land in the package's testdata/fuzz/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME=${FUZZTIME:-30s}

targets=$(grep -rlE '^func Fuzz[A-Za-z0-9_]*\(' --include='*_test.go' --exclude-dir=_output . | sort || true)
if [[ -z $targets ]]; then
  echo "no Fuzz targets"
  exit 0
fi
failed=()
for file in $targets; do
  pkg=./$(dirname "${file#./}")
  # hack/tools is a module of its own: its targets run from there.
  mod=.
  if [[ $pkg == ./hack/tools/* ]]; then mod=hack/tools; fi
  for name in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$file" | awk '{print $2}'); do
    echo "== $pkg $name ($FUZZTIME)"
    go -C "$mod" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./${pkg#./hack/tools/}" || failed+=("$pkg $name")
  done
done
if ((${#failed[@]} > 0)); then
  printf 'fuzz failures:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
