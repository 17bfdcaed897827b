"""One table renderer for both studies' reports: Markdown, CSV and LaTeX from header and rows.

Cells arrive as strings already formatted by the study. Two pinned variants keep every
published file byte-identical: the static report pads its Markdown alignment row
(``| --- | ---: |``) and escapes LaTeX specials (``&``, ``%``, ``_``, ``#``, ``$``, the en dash
as ``--``); the V2 report writes a compact alignment row (``|---|---:|``) and cells that need no
escaping.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Final

__all__ = ["csv_text", "latex_lines", "markdown_lines", "tex_escape"]

_TEX: Final = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "\u2013": "--", "$": r"\$"}


def markdown_lines(
    header: Sequence[str], body: Sequence[Sequence[str]], *, text_columns: int, padded: bool
) -> list[str]:
    """A Markdown table: the first ``text_columns`` columns left-aligned, the rest right."""
    align = ["---"] * text_columns + ["---:"] * (len(header) - text_columns)
    rule = "| " + " | ".join(align) + " |" if padded else "|" + "|".join(align) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def csv_text(rows: Sequence[Sequence[str]]) -> str:
    """Rows as CSV (``\\n`` line ends, minimal quoting)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue()


def tex_escape(text: str) -> str:
    """``text`` with the LaTeX specials a table cell can hold escaped."""
    return "".join(_TEX.get(ch, ch) for ch in text)


def latex_lines(
    header: Sequence[str], body: Sequence[Sequence[str]], *, spec: str, caption: str, escape: bool
) -> list[str]:
    """A booktabs ``tabular`` in a ``table`` environment, captioned (cells escaped if asked)."""
    cell = tex_escape if escape else str
    return [
        r"\begin{table}[t]",
        r"\centering",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(cell(h) for h in header) + r" \\",
        r"\midrule",
        *(" & ".join(cell(c) for c in row) + r" \\" for row in body),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{cell(caption)}}}",
        r"\end{table}",
    ]
