#!/usr/bin/env bash
# test.sh: what `make test` runs, stage by stage, with each stage's time. A
# stage's failure stops the run (later stages are not started); the table of
# stages and times is printed either way. TEST_STAGES (space-separated make
# targets) overrides the list.
#
# The e2e suite runs once, on the 3-node cluster (test-multinode): its
# single-node tests on multinet-node2, then the multi-node tests, then
# Multus's e2e scenarios (hack/multus-e2e.sh) on multinet-node2, all on the
# one cluster (hack/e2e.sh). Its run on a
# 1-node cluster (test-e2e) is a target of its own, outside make test, so that
# make test stays under an hour on 2 cores with a cold build; the 1-node
# cluster is still brought up and used by chaos-short and make demo.
#
# Before the first stage it prints the tests that may skip under CI=true
# (internal/testing/testskip/allowed.txt): every other skip fails its test there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

read -r -a stages <<<"${TEST_STAGES:-verify test-unit test-multinode chaos-short}"

make --no-print-directory skips

declare -a done_lines=()
t_all=$SECONDS
summary() {
  local line
  echo
  echo "== make test: stage times"
  for line in "${done_lines[@]}"; do echo "  $line"; done
  echo "  total $((SECONDS - t_all))s"
}

rc=0
for s in "${stages[@]}"; do
  echo "== make test: stage $s ($(date -u +%H:%M:%S) UTC)"
  t0=$SECONDS
  make --no-print-directory "$s"
  rc=$?
  done_lines+=("$(printf '%-16s %5ds  %s' "$s" $((SECONDS - t0)) "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")")")
  ((rc == 0)) || break
done
summary
exit "$rc"
