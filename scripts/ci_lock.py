"""CI: check the committed study lock against the code, then rewrite it for this interpreter.

The lock (``schedules/study-lock.json``) pins every covered file's digest and the interpreter and
runtime dependency versions it was written with. A CI runner's Python is another patch release
(or 3.13), so its environment line always differs; every other difference means the committed
lock does not match the committed code, and this exits 1 naming it. Then the lock is rewritten
in the runner's checkout for this interpreter, so the suite (``test_lock_committed_lock_is_current``
and every run that preflights the default lock) runs against a current lock. Never commit what
a runner wrote.
Run: .venv/bin/python scripts/ci_lock.py
"""

from __future__ import annotations

import sys

from harness.lock import DEFAULT_LOCK_PATH, check_lock, project_root, write_lock


def main() -> int:
    """Exit 1 when the committed lock differs from the code in more than the environment."""
    root = project_root()
    path = root / DEFAULT_LOCK_PATH
    lines = check_lock(path, root)
    code = [line for line in lines if not line.startswith("environment is ")]
    if code:
        print("the committed study lock does not match the code:", file=sys.stderr)
        for line in code:
            print(f"  {line}", file=sys.stderr)
        return 1
    for line in lines:
        print(f"lock: {line} (rewritten for this runner)")
    write_lock(path, root)
    print(f"lock: {path} is current for this interpreter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
