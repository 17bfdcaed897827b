"""Regenerate the canonical V2 schedule and its digest from the frozen study config.

Writes ``schedules/v2-schedule.json`` (the 576 rows) and ``schedules/v2-schedule.digest`` (the
schedule digest the store binds). Run after an intended change to schedules/v2-config.json;
review the diff before committing it. ``tests/unit/test_v2_schedule.py`` fails until both files
match what the config generates.

Usage: ``python scripts/make_v2_schedule.py [--config PATH] [--out PATH] [--digest PATH]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config
from harness.studies.v2.schedule import (
    DEFAULT_DIGEST_PATH,
    DEFAULT_SCHEDULE_PATH,
    build_rows,
    digest_line,
    encode_schedule,
)

ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def main(config_path: Path, out: Path, digest_out: Path) -> None:
    """Build the rows from the config at ``config_path``; write the schedule and its digest."""
    config, _ = load_config(config_path)
    rows = build_rows(config)
    _write(out, encode_schedule(rows))
    line = digest_line(rows)
    _write(digest_out, line)
    print(f"{out}: {line.decode().strip()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / DEFAULT_CONFIG_PATH)
    parser.add_argument("--out", type=Path, default=ROOT / DEFAULT_SCHEDULE_PATH)
    parser.add_argument("--digest", type=Path, default=ROOT / DEFAULT_DIGEST_PATH)
    args = parser.parse_args()
    main(args.config, args.out, args.digest)
