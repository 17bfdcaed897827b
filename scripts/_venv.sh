# Sourced by scripts/run and scripts/test: make .venv when it is missing or stale.
# "Stale" means pyproject.toml or requirements.lock changed since the last install (their BLAKE2
# digest is stamped). Versions come from requirements.lock, the exact set the study was run with.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "error: python3 >= 3.11 is required (found $("$py" --version 2>&1))" >&2; exit 2; }
want="$("$py" -c 'import hashlib,sys; print(hashlib.blake2b(b"".join(open(p,"rb").read() for p in sys.argv[1:])).hexdigest())' "$root/pyproject.toml" "$root/requirements.lock")"
have="$(cat "$venv/.stamp" 2>/dev/null || true)"
if [ ! -x "$venv/bin/python" ] || [ "$want" != "$have" ]; then
  echo "setting up $venv ..." >&2
  log="$(mktemp)"
  if ! { "$py" -m venv "$venv" && "$venv/bin/python" -m pip install -c "$root/requirements.lock" -e "$root[dev]"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: could not install the project into $venv (log above)" >&2
    exit 2
  fi
  rm -f "$log"
  echo "$want" > "$venv/.stamp"
fi
