"""Evidence-Carrying Termination: verifier, benchmark, studies and their audit trail."""

import sys

__version__ = "0.1.0"

# Checked before any module that needs 3.11 syntax or stdlib is imported, so an older
# interpreter gets one line naming the fix instead of a traceback.
if sys.version_info < (3, 11):  # noqa: UP036
    major, minor = sys.version_info[:2]
    sys.stderr.write(
        f"error: ect-harness needs Python >= 3.11 (this is {major}.{minor}): run it with a "
        "newer python3, e.g. PYTHON=/path/to/python3.11 scripts/run\n"
    )
    raise SystemExit(2)
