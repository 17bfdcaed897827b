"""``report.html`` for both studies: one self-contained, archivable page, byte-deterministic.

The page loads nothing: a Content-Security-Policy meta tag forbids every fetch (figures are
inlined as ``data:`` URIs), the CSS is inline and the only script is a small inline filter for
the cell list. Everything is readable with JavaScript off: the filter controls are ``hidden``
until the script shows them, every table is plain HTML, and each cell's transcript sits in a
collapsed ``<details>`` element the browser opens without script. No timestamp, no random id:
the same report inputs give the same bytes.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["Cell", "Filter", "figure", "figure_section", "page", "paragraph", "section", "table"]

_CSS: Final = """
:root{color-scheme:light;--ink:#1b1b1b;--muted:#555;--rule:#c8c8c8;--ect:#0072B2;--warn:#8a3b00}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:0 auto;max-width:1100px;padding:1.2rem 1.5rem 4rem}
h1{font-size:1.5rem;margin:.2rem 0 .6rem}h2{font-size:1.2rem;margin:2rem 0 .5rem;
border-bottom:1px solid var(--rule);padding-bottom:.2rem}h3{font-size:1rem;margin:1.2rem 0 .4rem}
.banner{border:2px solid var(--warn);background:#fff4e5;color:var(--warn);font-weight:700;
padding:.5rem .8rem;margin:.5rem 0}
.meta{color:var(--muted);font-size:.85rem;overflow-wrap:anywhere}
nav ul{display:flex;flex-wrap:wrap;gap:.3rem 1rem;list-style:none;padding:0;margin:.5rem 0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.9rem}
th,td{border-bottom:1px solid var(--rule);padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.ect td:first-child{font-weight:700;color:var(--ect)}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid var(--rule)}
figcaption{font-size:.85rem;color:var(--muted)}
#filters{display:flex;flex-wrap:wrap;gap:.5rem 1.2rem;align-items:center;margin:.5rem 0;
padding:.5rem;background:#f7f7f7}
#filters[hidden]{display:none}
details.cell{border:1px solid var(--rule);margin:.25rem 0;padding:.2rem .5rem}
details.cell summary{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;
font-size:.85rem}
details.cell pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8rem;margin:.4rem 0}
.hidden{display:none}
@media print{#filters{display:none}details.cell{break-inside:avoid}}
"""

_SCRIPT: Final = """
(function(){
var form=document.getElementById('filters');
if(!form){return;}
form.hidden=false;
var cells=Array.prototype.slice.call(document.querySelectorAll('details.cell'));
var count=document.getElementById('shown');
function apply(){
var want={};
Array.prototype.forEach.call(form.querySelectorAll('select'),function(s){want[s.name]=s.value;});
var n=0;
cells.forEach(function(c){
var ok=Object.keys(want).every(function(k){return !want[k]||c.getAttribute('data-'+k)===want[k];});
c.classList.toggle('hidden',!ok);if(ok){n+=1;}
});
count.textContent=n+' of '+cells.length+' cells shown';
}
form.addEventListener('change',apply);
apply();
})();
"""

_CSP: Final = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def paragraph(text: str, *, cls: str | None = None) -> str:
    """One escaped paragraph."""
    attr = f' class="{_e(cls)}"' if cls else ""
    return f"<p{attr}>{_e(text)}</p>\n"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    numeric_from: int = 1,
    highlight: Sequence[bool] | None = None,
    caption: str | None = None,
) -> str:
    """A plain HTML table; columns from ``numeric_from`` on are right-aligned."""

    def cls(i: int) -> str:
        return ' class="num"' if i >= numeric_from else ""

    out = ['<div class="scroll"><table>']
    if caption:
        out.append(f"<caption>{_e(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th{cls(i)}>{_e(h)}</th>" for i, h in enumerate(header)))
    out.append("</tr></thead><tbody>")
    for index, row in enumerate(rows):
        mark = ' class="ect"' if highlight is not None and highlight[index] else ""
        cells = "".join(f"<td{cls(i)}>{_e(c)}</td>" for i, c in enumerate(row))
        out.append(f"<tr{mark}>{cells}</tr>")
    out.append("</tbody></table></div>\n")
    return "".join(out)


def figure(png: bytes, *, alt: str, caption: str) -> str:
    """An inlined PNG figure with its caption."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(alt)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>\n"
    )


def section(anchor: str, title: str, body: str) -> tuple[str, str, str]:
    """A section for ``page``: its anchor, title and inner HTML."""
    return (anchor, title, body)


def figure_section(
    png: bytes | None, *, alt: str, caption: str, vectors: str
) -> tuple[str, str, str]:
    """The report's "Figure" section: the inlined PNG and where its vector copies are
    (``vectors``, e.g. "ucr.svg, ucr.pdf"), or a note that the plots extra was missing."""
    if png is None:
        body = paragraph("No figure: the report was made without the [plots] extra (matplotlib).")
    else:
        body = figure(png, alt=alt, caption=caption) + paragraph(
            f"The same figure as vector graphics: {vectors}."
        )
    return section("figure", "Figure", body)


@dataclass(frozen=True)
class Filter:
    """One filter control of the cell list: the attribute it matches and its choices."""

    name: str
    label: str
    choices: Sequence[str]


@dataclass(frozen=True)
class Cell:
    """One collapsed cell: its summary line, data attributes and preformatted transcript."""

    summary: str
    attributes: Mapping[str, str]
    text: str


def _cells(filters: Sequence[Filter], cells: Sequence[Cell]) -> str:
    out = ['<form id="filters" hidden>']
    for f in filters:
        options = '<option value="">all</option>' + "".join(
            f'<option value="{_e(c)}">{_e(c)}</option>' for c in f.choices
        )
        out.append(f'<label>{_e(f.label)} <select name="{_e(f.name)}">{options}</select></label>')
    out.append('<output id="shown"></output></form>\n')
    out.append(
        "<noscript><p>Filtering needs JavaScript; every cell is listed below. Open a cell to "
        "read its transcript.</p></noscript>\n"
    )
    for c in cells:
        attrs = "".join(f' data-{_e(k)}="{_e(v)}"' for k, v in sorted(c.attributes.items()))
        out.append(
            f'<details class="cell"{attrs}><summary>{_e(c.summary)}</summary>'
            f"<pre>{_e(c.text)}</pre></details>\n"
        )
    return "".join(out)


def page(
    *,
    title: str,
    banners: Sequence[str],
    meta: Sequence[str],
    sections: Sequence[tuple[str, str, str]],
    filters: Sequence[Filter] = (),
    cells: Sequence[Cell] | None = None,
) -> bytes:
    """The whole page as UTF-8 bytes (see the module docstring)."""
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en"><head><meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style></head><body>\n",
        f"<header><h1>{_e(title)}</h1>\n",
        *(f'<p class="banner" role="note">{_e(b)}</p>\n' for b in banners),
        *(f'<p class="meta">{_e(m)}</p>\n' for m in meta),
        "</header>\n<nav><ul>",
        *(f'<li><a href="#{_e(a)}">{_e(t)}</a></li>' for a, t, _ in sections),
    ]
    if cells is not None:
        parts.append('<li><a href="#cells">Cells</a></li>')
    parts.append("</ul></nav>\n<main>\n")
    for anchor, heading, body in sections:
        parts.append(f'<section id="{_e(anchor)}"><h2>{_e(heading)}</h2>\n{body}</section>\n')
    if cells is not None:
        parts.append(
            f'<section id="cells"><h2>Cells ({len(cells)})</h2>\n{_cells(filters, cells)}'
            "</section>\n"
        )
        parts.append(f"<script>{_SCRIPT}</script>\n")
    parts.append("</main></body></html>\n")
    return "".join(parts).encode("utf-8")
