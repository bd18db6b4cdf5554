#!/usr/bin/env bash
# verify.sh: gofmt, go vet (with and without the e2e build tag) and, when
# present, hack/verify-codegen.sh. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== gofmt"
unformatted=$(find . -path ./_output -prune -o -path ./.git -prune -o -name '*.go' -print | xargs -r gofmt -l)
if [[ -n $unformatted ]]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...
if [[ -d test/e2e ]]; then go vet -tags e2e ./test/e2e/...; fi

if [[ -x hack/verify-codegen.sh ]]; then
  echo "== hack/verify-codegen.sh"
  hack/verify-codegen.sh
fi
echo "verify: ok"
