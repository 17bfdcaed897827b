#!/usr/bin/env bash
# The wheel as a new user installs it: built from this tree, installed into a fresh venv of the
# given interpreter with no extras and no constraints (pip resolves the newest dependency
# versions within pyproject.toml's ranges), then run from an unrelated directory: a V2 pilot
# and its report, the static study and its report, `harness lock --check`. The reports must name
# the interpreter that produced them. Needs the package index (the dependencies are fetched).
# Usage: scripts/wheel_check.sh [PYTHON]   (default: python3)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step() { printf 'wheel check (%s): %s\n' "$("$py" --version 2>&1)" "$*" >&2; }
run() {
  local log="$work/step.log"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: wheel check failed: $*" >&2
    exit 1
  fi
}

step "build the wheel from a clean copy of the sources"
mkdir "$work/source"
cp "$root/pyproject.toml" "$root/README.md" "$root/LICENSE" "$work/source/"
for name in harness preflight schedules sandbox_profiles; do
  cp -R "$root/$name" "$work/source/$name"
done
find "$work/source" -name __pycache__ -type d -prune -exec rm -rf {} +
run "$py" -m venv "$work/build"
run "$work/build/bin/python" -m pip wheel --no-deps -q -w "$work/dist" "$work/source"
wheel="$(ls "$work"/dist/ect_harness-*.whl)"

step "install it with no extras into a fresh venv"
run "$py" -m venv "$work/venv"
run "$work/venv/bin/python" -m pip install -q "$wheel"
harness="$work/venv/bin/harness"
mkdir "$work/elsewhere"
cd "$work/elsewhere"

step "harness lock --check (the environment is named, never stale)"
run "$harness" lock --check
step "harness v2 run --limit 24, v2 report"
run "$harness" -q v2 run --limit 24 --store v2
run "$harness" v2 report v2
step "harness static run, static report"
run "$harness" -q static run --out static
run "$harness" static report static
version="$("$work/venv/bin/python" -c 'import platform; print(platform.python_implementation(), platform.python_version())')"
for report in v2/report/report.md static/report/table2.md; do
  grep -q "Environment: $version on " "$report" \
    || { echo "error: wheel check failed: $report does not name $version" >&2; exit 1; }
done
step "ok: the reports name $version"
