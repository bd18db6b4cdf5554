#!/usr/bin/env bash
# Checks that the generated deepcopy code, CRD manifests and typed client
# (clientset, listers, informers in pkg/client) match the API types:
# regenerates them (hack/update-codegen.sh) in a scratch copy of the module and
# diffs the copy against the repository. Exit 0 when up to date; exit 1 and
# print the diff when stale (fix: run hack/update-codegen.sh and commit).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/multinet-codegen.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/hack" "$tmp/deploy"
cp "$repo/go.mod" "$repo/go.sum" "$tmp/"
cp -R "$repo/api" "$tmp/api"
cp "$repo/hack/boilerplate.go.txt" "$repo/hack/update-codegen.sh" "$tmp/hack/"

CODEGEN_TOOLS_MODULE="$repo/hack/tools" bash "$tmp/hack/update-codegen.sh" "$tmp"

status=0
for d in api deploy/crds pkg/client/clientset pkg/client/listers pkg/client/informers; do
	if ! diff -ruN "$repo/$d" "$tmp/$d" >"$tmp/diff.txt"; then
		# Show paths relative to the repository.
		sed -e "s|$repo/||g" -e "s|$tmp/|regenerated/|g" "$tmp/diff.txt"
		status=1
	fi
done

if [[ $status -ne 0 ]]; then
	echo "generated files are stale: run hack/update-codegen.sh and commit the result" >&2
	exit 1
fi
echo "generated files are up to date"
