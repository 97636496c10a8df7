"""Options every command shares (--store, --tenant) and small output helpers."""

from __future__ import annotations

import argparse
import os

DEFAULT_STORE = "file://./.compactor"
DEFAULT_TENANT = "default"


def add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=os.environ.get("COMPACTOR_STORE", DEFAULT_STORE),
        help="object store URL: file://DIR (default %(default)s) or s3://BUCKET/PREFIX",
    )
    p.add_argument(
        "--tenant",
        default=os.environ.get("COMPACTOR_TENANT", DEFAULT_TENANT),
        help="tenant id (default %(default)s)",
    )


def table(rows: list[list[object]], header: list[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if _num(c) else c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _num(s: str) -> bool:
    return s.replace(",", "").replace(".", "", 1).replace("%", "").lstrip("-").isdigit()
