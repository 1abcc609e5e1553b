#!/usr/bin/env bash
# The test suite N times in a row (default 5) on a loaded machine: as many busy processes as
# cores run beside it (`stress-ng --cpu` when installed, else busy python loops), so a test
# that depends on timing or scheduling shows up. Stops at the first failing run; the load is
# stopped on exit whatever happens.
#
#   scripts/suite_under_load.sh [RUNS] [-- PYTEST ARGS...]     e.g. scripts/suite_under_load.sh 5 -- -x
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
shift || true
[ "${1:-}" = "--" ] && shift
cores="$(nproc)"
load=()
cleanup() { for pid in "${load[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu "$cores" --quiet & load+=($!)
else
  for _ in $(seq 1 "$cores"); do
    .venv/bin/python -c "while True: pass" & load+=($!)
  done
fi
echo "load: ${#load[@]} busy process(es) on $cores core(s)"
for run in $(seq 1 "$runs"); do
  echo "run $run of $runs"
  if ! .venv/bin/python -m pytest -q -p no:randomly "$@"; then
    echo "run $run failed under load"
    exit 1
  fi
done
echo "$runs runs passed under load"
