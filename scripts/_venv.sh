# Sourced by scripts/run and scripts/test: make .venv when it is missing or stale.
# "Stale" means pyproject.toml or requirements.lock changed since the last install, or another
# interpreter is asked for (PYTHON=...): their BLAKE2 digest is stamped. Every third-party file
# is installed in hash-checking mode from requirements.lock (core, every extra and the dev tools,
# for CPython 3.11-3.13 on Linux and macOS); the project itself is then installed editable with
# no dependency resolution (hash mode cannot hash a local tree, and the extras are already in
# the lock), and `pip check` proves the locked set satisfies every declared range.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"  # VENV=DIR: another venv (CI's second interpreter)
py="${PYTHON:-python3}"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "error: python3 >= 3.11 is required (found $("$py" --version 2>&1))" >&2; exit 2; }
"$py" -c 'import venv, ensurepip' 2>/dev/null \
  || { echo "error: $py has no venv module (on Debian or Ubuntu: apt-get install python3-venv)" >&2; exit 2; }
want="$("$py" -c 'import hashlib,sys; print(hashlib.blake2b(sys.version.encode() + sys.executable.encode() + b"".join(open(p,"rb").read() for p in sys.argv[1:])).hexdigest())' "$root/pyproject.toml" "$root/requirements.lock")"
have="$(cat "$venv/.stamp" 2>/dev/null || true)"
if [ ! -x "$venv/bin/python" ] || [ "$want" != "$have" ]; then
  echo "setting up $venv with $("$py" --version 2>&1) ..." >&2
  log="$(mktemp)"
  if ! {
    "$py" -m venv --clear "$venv" \
      && "$venv/bin/python" -m pip install --require-hashes --no-deps -r "$root/requirements.lock" \
      && "$venv/bin/python" -m pip install --no-deps --no-build-isolation --no-index -e "$root" \
      && "$venv/bin/python" -m pip check
  } >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: could not install the project into $venv (log above)" >&2
    exit 2
  fi
  rm -f "$log"
  echo "$want" > "$venv/.stamp"
fi
