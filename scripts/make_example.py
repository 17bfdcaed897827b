"""Write the bundled worked example's JSON files (harness/examples/regional-sum/)."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from harness.examples import EXAMPLE_DIR_NAME, regional_sum


def example_files() -> dict[str, bytes]:
    """File name -> pretty JSON bytes of the example's four inputs."""
    example = regional_sum()
    return {
        f"{name}.json": msgspec.json.format(msgspec.json.encode(getattr(example, name))) + b"\n"
        for name in ("descriptor", "requirements", "ledger", "certificate")
    }


def main(out: Path) -> None:
    """Write the example into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, data in example_files().items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "harness" / "examples" / EXAMPLE_DIR_NAME
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
