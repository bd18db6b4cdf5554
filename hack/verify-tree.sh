#!/usr/bin/env bash
# verify-tree.sh: the tree stands on its own (make verify runs it). Fails when
#   1. a tracked file sends the reader outside the repository: a design brief
#      or spec copy that is not in it (DESIGN.md, ../shared/, spec/NNN);
#   2. a tracked file names one of our own issues by number ("issue" and a
#      number): say the thing itself, or link a docs/ page. Upstream
#      projects' issues are cited by URL (github.com/<org>/<repo>/issues/N)
#      or as <repo>#N, which this does not match;
#   3. a binary is tracked (a file git's text heuristic calls binary: a NUL
#      byte in it), pictures (.png, .jpg, .gif, .webp) of the docs aside;
#      builds go to _output/ and the root's /multinet-* are ignored;
#   4. README.md's Architecture section does not name a package of pkg/ or
#      internal/ (as `internal/node/attach`), nor a package it lies in (a
#      package's own subpackages go with it): every package belongs to a
#      group there; and a package lies outside the component folders:
#      pkg/ holds only the client and the spec logic (pkg/client,
#      pkg/spec), internal/ only component folders, not a flat list;
#   5. the product module lists a module only the developer tools need:
#      hack/tools must be a module of its own, the product's go.mod must have
#      no tool directive, every module it requires must be needed by the
#      product or its tests (go mod why -m), and both modules must be tidy.
# Prints every offence, then exits 1 if there was one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

self=hack/verify-tree.sh
failed=0
fail() {
  echo "verify-tree: $1" >&2
  [[ -z ${2:-} ]] || printf '%s\n' "$2" | sed 's/^/  /' >&2
  failed=1
}

# tracked_grep PATTERN: "file:line:text" of every tracked text file but this
# script that matches the extended regular expression PATTERN.
tracked_grep() { git grep -n -I -E "$1" -- ":!$self" || true; }

hits=$(tracked_grep 'DESIGN\.md|\.\./shared/|/work/shared|spec/0[0-9]{2}\b')
[[ -z $hits ]] || fail "references to documents outside the repository (say the thing itself, or link a docs/ page):" "$hits"

hits=$(tracked_grep '\b[Ii][Ss][Ss][Uu][Ee][Ss]?[[:space:]]*#?[0-9]+')
[[ -z $hits ]] || fail "internal issue numbers (say what is meant; cite upstream issues by URL):" "$hits"

binaries=$(comm -23 <(git ls-files | sort) <(git grep -I -l -e '' -- . | sort) |
  { grep -viE '\.(png|jpe?g|gif|webp)$' || true; } |
  while IFS= read -r f; do [[ ! -s $f ]] || echo "$f"; done)
[[ -z $binaries ]] || fail "tracked binaries (build into _output/; git rm --cached them):" "$binaries"

architecture=$(sed -n '/^## Architecture/,/^## [^A]/p' README.md)
named() { # named DIR: README names DIR, a package DIR lies in, or pkg/client (generated)
  local d=$1
  while [[ $d == */* ]]; do
    if [[ $d == "$1" || $d == pkg/client ]] || compgen -G "$d/*.go" >/dev/null; then
      grep -qF "\`$d\`" <<<"$architecture" && return 0
    fi
    d=${d%/*}
  done
  return 1
}
unnamed=$(git ls-files -- 'pkg/*.go' 'internal/*.go' | grep -v '/testdata/' | xargs -r dirname | sort -u |
  while IFS= read -r pkg; do named "$pkg" || echo "$pkg"; done)
[[ -z $unnamed ]] || fail "packages README.md's Architecture section does not name (add each to its group's line):" "$unnamed"
# pkg/ is what another project may import (the generated client, the spec
# logic); what only our binaries use lies in a component folder of internal/.
components='node|devices|ipam|webhook|cli|process|render|testing|checks'
astray=$(git ls-files -- 'pkg/*.go' 'internal/*.go' | grep -v '/testdata/' | xargs -r dirname | sort -u |
  grep -vE "^pkg/client(/|\$)|^pkg/spec/|^internal/($components)(/|\$)" || true)
[[ -z $astray ]] || fail "packages outside the component folders (pkg/spec, pkg/client, internal/{${components//|/,}}; docs/decisions/tree.md):" "$astray"

if [[ $(go -C hack/tools list -m 2>/dev/null) != */hack/tools ]]; then
  fail "hack/tools is not a module of its own (hack/tools/go.mod): the tools' dependencies would be the product's"
fi
tools=$(go mod edit -json | jq -r '.Tool // [] | .[].Path')
[[ -z $tools ]] || fail "the product's go.mod has tool directives (they belong in hack/tools/go.mod):" "$tools"
mapfile -t required < <(go mod edit -json | jq -r '.Require // [] | .[].Path')
if ((${#required[@]})); then
  unneeded=$(go mod why -m "${required[@]}" | grep -F '(main module does not need' || true)
  [[ -z $unneeded ]] || fail "the product's go.mod requires modules neither the product nor its tests import:" "$unneeded"
fi
for dir in . hack/tools; do
  if ! diff=$(go -C "$dir" mod tidy -diff 2>&1); then
    fail "go.mod/go.sum in $dir are not tidy (go -C $dir mod tidy):" "$diff"
  fi
done

((failed == 0)) || exit 1
echo "verify-tree: ok"
