"""The static study's report: every endpoint, H1, Table 2 and Table 3, from the run's records.

``analysis.load_run`` reads a static run store through verification and refuses a tampered
store, a store of another study and records that are not one decision per policy and snapshot
(an unfinalized store loads as partial: the console, table2.md, table2.json, endpoints.md
and report.html say so; CSV, LaTeX and figures have no place for it; ``report-manifest.json``,
the report manifest both studies write, marks it for machines: replay then says the report is
stale once the store has grown, and resume removes it).
``analysis.analyze`` recomputes everything from the records:

- per policy: U (unsafe ``complete`` on fault snapshots), C (clean snapshots not completed),
  S (``stuck`` on fault snapshots), macro-F1 over {complete, not complete}, the UCR with a
  task-cluster bootstrap interval, and which kind of rule decided;
- breakdowns by fault and by task family; ECT's reason families per fault (localisation);
- unsupported claims accepted: every F1-F7 snapshot carries a completion claim its evidence
  does not support (F8's agent has not answered), so a policy that completes one accepts an
  unsupported claim; per policy, the count over those snapshots with a task-cluster interval;
  provider requests, attempts, retries, failures, tokens, latency and cost per policy;
- H1: per task, "any unsafe complete among its faults" for ECT and the critic core; exact
  two-sided McNemar on the discordant tasks; the paired UCR difference with a task-cluster
  bootstrap and a world-cluster sensitivity bootstrap (all faults and both policies kept per
  resampled cluster). H1 passes iff the estimate < 0, p < .05 and the task interval's upper
  end < 0;
- Table 3: each single-check ablation's effect on its matched fault (ablated minus full ECT),
  the residual containment by other checks, and effects on other faults.

Renderers produce Markdown, CSV, LaTeX, JSON and one self-contained ``report.html``;
``write_report`` writes them and the figure (PNG, SVG, PDF) into ``STORE/report``. With the
simulated provider the full-trace critic row is labelled "(simulated)" everywhere: it is a
deterministic permissive reviewer, not the paper's Gemini arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.canonical import canonical_bytes
from harness.errors import RunRecordsError
from harness.extras import extra_installed
from harness.faults import STATIC_FAULTS
from harness.log import get_logger
from harness.policies import Ablation
from harness.run_identity import IDENTITY_COLUMNS, RunIdentity
from harness.safeio import write_atomic
from harness.studies._tables import csv_text, latex_lines, markdown_lines
from harness.studies.provenance import with_environment_header
from harness.studies.report_manifest import with_manifest
from harness.studies.static.analysis import (
    ABLATION_LABELS,
    CLAIM_FAULTS,
    CLEAN_FAULT,
    ENDPOINT_NAMES,
    RECOVERABLE_FAULTS,
    UNSUPPORTED_BOOTSTRAP_SEED,
    AblationRow,
    StaticResults,
    analyze,
    load_run,
)
from harness.studies.static.records import (
    FIGURE_FILES,
    REPORT_DIR,
    REPORT_FILES,
    REPORT_MANIFEST_SCHEMA,
)
from harness.studies.static.run import (
    ABLATION_POLICIES,
)

_log = get_logger("harness.studies.static")

__all__ = [
    "FIGURE_FILES",
    "REPORT_DIR",
    "REPORT_FILES",
    "partial_line",
    "render_files",
    "figure_caption",
    "h1_line",
    "run_of",
    "breakdown_table",
    "render_endpoints",
    "secondary_table",
    "render_html",
    "render_table2",
    "render_table3",
    "unsupported_table",
    "write_report",
]


_DASH: Final = "\u2013"  # the en dash the paper's tables use for "not applicable"


# ---------------------------------------------------------------------------------------------
# Rendering


def _f1(value: float) -> str:
    text = f"{value:.3f}"
    return text[1:] if text.startswith("0.") else text


def _pp(value: float) -> str:
    return f"{value:.2f}"


def run_of(results: StaticResults) -> RunIdentity:
    """The run identity the results name (always bound by ``analyze``)."""
    if results.run is None:
        raise RunRecordsError("the static results hold no run identity")
    return results.run


def h1_line(results: StaticResults) -> str:
    """The H1 sentence: b counts, exact p, the paired difference and both intervals; on a
    partial store, why H1 is not evaluated."""
    h = results.h1
    note = run_of(results).verdict_note()
    if note:
        return f"H1 (ECT vs critic core): {note}."
    verdict = "passed" if h.passed else "failed"
    return (
        f"H1 (ECT vs critic core, {h.tasks} task clusters): b_ECT = {h.b_ect}, "
        f"b_critic = {h.b_critic}, exact McNemar p = {h.p_value:.5e}; ECT-minus-critic-core UCR "
        f"{_pp(h.estimate_pp)} pp, 95% task-cluster interval [{_pp(h.task_low_pp)}, "
        f"{_pp(h.task_high_pp)}] pp ({h.replicates:,} replicates); {h.worlds}-world "
        f"sensitivity interval [{_pp(h.world_low_pp)}, {_pp(h.world_high_pp)}] pp; "
        f"H1 {verdict}."
    )


def partial_line(results: StaticResults) -> str | None:
    """The warning a report of an unfinalized store carries (None: the store is complete)."""
    run = run_of(results)
    return run.banners()[-1] if run.partial else None


def _notes(results: StaticResults, *, identity: bool = True) -> list[str]:
    """The notes under Table 2: the run identity and its warnings (unless the page shows them
    already, ``identity=False``), then what each reference policy is."""
    run = run_of(results)
    notes = [
        *([f"{run.line()}.", *run.banners()] if identity else []),
        "Postcondition oracle: non-deployable reference (it sees gold answers).",
        "Critic core: every decision is a deterministic fast-path decision, not an LLM judgement.",
    ]
    if results.simulated:
        notes.append(
            "Full-trace critic (simulated): verdicts from the deterministic simulated provider "
            "(a permissive reviewer, not an LLM)."
        )
    else:
        notes.append(f"Full-trace critic: model {run.model}.")
    return notes


def _table2_cells(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    header = [
        "Policy",
        f"U/{results.faults}",
        f"C/{results.cleans}",
        f"S/{results.faults}",
        "F1",
    ]
    body = [
        [row.label, str(row.unsafe), str(row.clean_non_complete), str(row.stuck), _f1(row.macro_f1)]
        for row in results.rows
    ]
    return header, body


def _effect(row: AblationRow) -> str:
    return _DASH if row.effect is None else f"{row.effect:+d} {row.endpoint}"


def _residual(row: AblationRow) -> str:
    if row.residual_contained is None:
        return _DASH
    families = ", ".join(f"{k} {v}" for k, v in row.residual_families.items())
    text = f"{row.residual_contained}/{row.tasks} still contained"
    return f"{text} ({families})" if families else text


def _others(row: AblationRow) -> str:
    if not row.other_effects:
        return "none"
    return ", ".join(
        f"{key.split()[0]} {value:+d} {key.split()[1]}" for key, value in row.other_effects.items()
    )


def _table3_cells(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    header = [
        "Check removed",
        "Target fault",
        f"Effect/{results.tasks}",
        "Residual containment",
        "Other faults",
    ]
    body = [[r.check, r.target, _effect(r), _residual(r), _others(r)] for r in results.ablations]
    return header, body


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]], numeric: int) -> str:
    lines = markdown_lines(header, body, text_columns=len(header) - numeric, padded=True)
    return "\n".join(lines) + "\n"


def _csv(results: StaticResults, header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """Rows as CSV, each ending with the run identity's columns."""
    tail = run_of(results).columns()
    return csv_text([[*header, *IDENTITY_COLUMNS], *([*row, *tail] for row in body)])


def _latex(header: Sequence[str], body: Sequence[Sequence[str]], spec: str, caption: str) -> str:
    return "\n".join(latex_lines(header, body, spec=spec, caption=caption, escape=True)) + "\n"


def _split_name(results: StaticResults) -> str:
    return "Held-out" if results.split == "heldout" else "Development"


def render_table2(results: StaticResults) -> dict[str, str]:
    """Table 2 as ``{"md", "csv", "tex", "json"}`` texts (Markdown ends with H1 and notes)."""
    header, body = _table2_cells(results)
    caption = (
        f"{_split_name(results)} static evaluation. U: unsafe complete; C: clean non-complete; "
        f"S: stuck. {run_of(results).line()}."
    )
    md = _markdown(header, body, numeric=4)
    md += "\n" + h1_line(results) + "\n\n" + "\n".join(f"- {n}" for n in _notes(results)) + "\n"
    h1 = msgspec.to_builtins(results.h1)
    if run_of(results).verdict_note():  # partial data: no verdict in any file
        h1.pop("passed")
        h1["verdict"] = run_of(results).verdict_note()
    payload = {
        "caption": caption,
        "columns": header,
        "rows": [msgspec.to_builtins(r) for r in results.rows],
        "h1": h1,
        "h1_line": h1_line(results),
        "notes": _notes(results),
        "run": msgspec.to_builtins(run_of(results)),
        "simulated": results.simulated,
        "split": results.split,
    }
    return {
        "md": md,
        "csv": _csv(results, header, body),
        "tex": _latex(header, body, "lrrrr", caption + " " + h1_line(results)),
        "json": _json(payload),
    }


def render_table3(results: StaticResults) -> dict[str, str]:
    """Table 3 as ``{"md", "csv", "tex", "json"}`` texts."""
    header, body = _table3_cells(results)
    caption = (
        "Single-check ablations. Effects are ablation-minus-ECT counts on the matched fault "
        "(U unsafe complete, S stuck); residual containment by other checks is retained. A zero "
        f"count does not establish that a check is unnecessary. {run_of(results).line()}."
    )
    payload = {
        "caption": caption,
        "columns": header,
        "rows": [msgspec.to_builtins(r) for r in results.ablations],
        "run": msgspec.to_builtins(run_of(results)),
        "split": results.split,
    }
    banners = "".join(f"\n{b}\n" for b in run_of(results).banners())
    return {
        "md": _markdown(header, body, numeric=0) + "\n" + caption + "\n" + banners,
        "csv": _csv(results, header, body),
        "tex": _latex(header, body, "lllll", caption),
        "json": _json(payload),
    }


def _json(obj: Any) -> str:
    return (msgspec.json.format(canonical_bytes(obj), indent=2) + b"\n").decode("utf-8")


_SECONDARY_NOTE: Final = (
    "Recoverable stuck: stuck on a snapshot whose recovery is available "
    f"({', '.join(RECOVERABLE_FAULTS)}), counted apart from the rest of S. Extra calls: continue "
    "on a clean snapshot, whose answer was already supported; each sends a finished agent on for "
    "at least one more call (a lower bound on the calls it wastes). Descriptive."
)


def secondary_table(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    """Per policy: S split into recoverable and other stuck, and extra calls."""
    head = ["Policy", "S", "Recoverable stuck", "Other stuck", "Extra calls"]
    body = [
        [
            row.label,
            f"{row.stuck}/{results.faults}",
            f"{row.recoverable_stuck}/{row.recoverable}",
            str(row.other_stuck),
            f"{row.extra_calls}/{row.cleans}",
        ]
        for row in results.secondary
    ]
    return head, body


def breakdown_table(
    results: StaticResults, endpoint: str, by: str
) -> tuple[list[str], list[list[str]]]:
    """One endpoint per policy (rows) and fault or family (columns)."""
    counts = results.endpoints_by_fault if by == "fault" else results.endpoints_by_family
    labels = {row.policy: row.label for row in results.rows}
    keys = list(next(iter(counts.values())))
    body = [[labels[p], *(str(counts[p][k][endpoint]) for k in keys)] for p in counts]
    return ["Policy", *keys], body


def _breakdowns(results: StaticResults) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """Every endpoint by fault and by family, with a title each."""
    return [
        (f"{name[0].upper()}{name[1:]} per {by}", breakdown_table(results, name, by))
        for by in ("fault", "family")
        for name in ENDPOINT_NAMES
    ]


def render_endpoints(results: StaticResults) -> dict[str, str]:
    """Secondary endpoints: by fault, by family, ECT localisation, decided-by, provider use."""
    faults = (CLEAN_FAULT, *STATIC_FAULTS)
    labels = {row.policy: row.label for row in results.rows}
    labels |= {
        p: f"ECT without {ABLATION_LABELS[a].lower()}"
        for a, p in zip(Ablation, ABLATION_POLICIES, strict=True)
    }
    sections = [f"# Static study endpoints ({results.split}, {results.tasks} tasks)\n"]
    sections += [f"{run_of(results).line()}.\n", *(b + "\n" for b in run_of(results).banners())]
    for verdict, title in (("complete", "Complete"), ("stuck", "Stuck")):
        body = [
            [labels[p], *(str(results.by_fault[p][f][verdict]) for f in faults)]
            for p in results.by_fault
        ]
        sections.append(
            f"## {title} decisions per fault (C0 = supported clean snapshot)\n\n"
            + _markdown(["Policy", *faults], body, numeric=len(faults))
        )
    families = sorted({f for counts in results.by_family.values() for f in counts})
    body = [
        [labels[p], *(str(results.by_family[p].get(f, 0)) for f in families)]
        for p in results.by_family
    ]
    sections.append(
        "## Unsafe completes per task family\n\n"
        + _markdown(["Policy", *families], body, numeric=len(families))
    )
    body = [
        [f, ", ".join(f"{k} {v}" for k, v in results.localisation[f].items()) or "none"]
        for f in faults
    ]
    sections.append(
        "## ECT reason families per fault (snapshots in which each family fired)\n\n"
        + _markdown(["Fault", "Reason families"], body, numeric=0)
    )
    body = [
        [row.label, ", ".join(f"{k} {v}" for k, v in row.decided_by.items())]
        for row in results.rows
    ]
    sections.append("## Decided by\n\n" + _markdown(["Policy", "Sources"], body, numeric=0))
    head, body = secondary_table(results)
    sections.append(
        "## Secondary endpoints: recoverable stuck and extra calls\n\n"
        + _markdown(head, body, numeric=len(head) - 1)
        + "\n"
        + _SECONDARY_NOTE
        + "\n"
    )
    for title, (head, body) in _breakdowns(results):
        sections.append(f"## {title}\n\n" + _markdown(head, body, numeric=len(head) - 1))
    head, body = unsupported_table(results)
    sections.append(
        "## Unsupported claims accepted (F1-F7 snapshots completed; 95% task-cluster interval)\n\n"
        + _markdown(head, body, numeric=len(head) - 1)
    )
    head = [
        "Policy",
        "Model decisions",
        "Attempts",
        "Retries",
        "Provider failures",
        "Parse failures",
        "Prompt tokens",
        "Output tokens",
        "Latency (s)",
        "Cost (USD)",
    ]
    body = [
        [
            labels[u.policy],
            str(u.model_decisions),
            str(u.attempts),
            str(u.retries),
            str(u.provider_failures),
            str(u.parse_failures),
            str(u.prompt_tokens),
            str(u.output_tokens + u.thought_tokens),
            f"{u.latency_s:.2f}",
            f"{u.cost_usd:.5f}",
        ]
        for u in results.usage
    ]
    sections.append("## Provider use\n\n" + _markdown(head, body, numeric=len(head) - 1))
    sections.append("\n".join(f"- {n}" for n in _notes(results)) + "\n")
    payload = {
        "by_family": results.by_family,
        "by_fault": results.by_fault,
        "localisation": results.localisation,
        "endpoints_by_family": results.endpoints_by_family,
        "endpoints_by_fault": results.endpoints_by_fault,
        "rows": [msgspec.to_builtins(r) for r in results.rows],
        "run": msgspec.to_builtins(run_of(results)),
        "secondary": [msgspec.to_builtins(r) for r in results.secondary],
        "ucr_replicates": results.ucr_replicates,
        "ucr_seed": results.ucr_seed,
        "unsupported_claims": [msgspec.to_builtins(u) for u in results.unsupported_claims],
        "unsupported_seed": UNSUPPORTED_BOOTSTRAP_SEED,
        "usage": [msgspec.to_builtins(u) for u in results.usage],
    }
    return {"md": "\n".join(sections), "json": _json(payload)}


def unsupported_table(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    """Unsupported claims accepted per policy: overall with its interval, then per fault."""
    head = ["Policy", "Accepted", "Rate (%)", "Interval (%)", *CLAIM_FAULTS]
    body = [
        [
            u.label,
            f"{u.accepted}/{u.claims}",
            f"{u.pct:.1f}",
            f"[{u.low_pct:.1f}, {u.high_pct:.1f}]",
            *(str(u.by_fault.get(f, 0)) for f in CLAIM_FAULTS),
        ]
        for u in results.unsupported_claims
    ]
    return head, body


def figure_caption(results: StaticResults) -> str:
    """The static figure's caption."""
    return (
        f"Unsafe completion rate per policy on {results.faults} fault snapshots of "
        f"{results.tasks} tasks ({_split_name(results).lower()} grid); whiskers are 95% "
        f"task-cluster bootstrap intervals ({results.ucr_replicates:,} replicates, seed "
        f"{results.ucr_seed}); labels give unsafe completes/fault snapshots. "
        f"{run_of(results).line()}."
    )


def render_html(results: StaticResults, png: bytes | None) -> bytes:
    """``report.html``: Table 2, H1, Table 3, the endpoints and the figure on one page."""
    from harness.studies import _html

    header, body = _table2_cells(results)
    t3_head, t3_body = _table3_cells(results)
    faults = (CLEAN_FAULT, *STATIC_FAULTS)
    labels = {row.policy: row.label for row in results.rows}
    labels |= {
        p: f"ECT without {ABLATION_LABELS[a].lower()}"
        for a, p in zip(Ablation, ABLATION_POLICIES, strict=True)
    }
    by_fault = [
        [labels[p], v, *(str(results.by_fault[p][f][v]) for f in faults)]
        for p in results.by_fault
        for v in ("complete", "stuck")
    ]
    families = sorted({f for counts in results.by_family.values() for f in counts})
    by_family = [
        [labels[p], *(str(results.by_family[p].get(f, 0)) for f in families)]
        for p in results.by_family
    ]
    localisation = [
        [f, ", ".join(f"{k} {v}" for k, v in results.localisation[f].items()) or "none"]
        for f in faults
    ]
    ucr = [
        [row.label, f"{row.unsafe}/{row.faults}", f"{100 * row.ucr:.1f}",
         f"[{100 * row.ucr_low:.1f}, {100 * row.ucr_high:.1f}]"]
        for row in results.rows
    ]  # fmt: skip
    sections = [
        _html.section(
            "table2",
            "Table 2",
            _html.table(header, body, highlight=[r.policy == "ect" for r in results.rows])
            + _html.paragraph(h1_line(results))
            + "".join(_html.paragraph(n) for n in _notes(results, identity=False)),
        ),
        _html.section(
            "ucr",
            "Unsafe completion rate with 95% task-cluster intervals",
            _html.table(["Policy", "Unsafe", "UCR (%)", "Interval (%)"], ucr),
        ),
        _html.section(
            "unsupported",
            "Unsupported claims accepted",
            _html.table(*unsupported_table(results))
            + _html.paragraph(
                "Every F1-F7 snapshot carries a completion claim its evidence does not "
                "support; a policy accepts it by completing. F8's agent has not answered."
            ),
        ),
    ]
    sections.append(
        _html.figure_section(
            png,
            alt="Bar chart of the unsafe completion rate per policy with interval whiskers",
            caption=figure_caption(results),
            vectors="ucr.svg, ucr.pdf",
        )
    )
    sections += [
        _html.section("table3", "Table 3: single-check ablations", _html.table(t3_head, t3_body)),
        _html.section(
            "faults",
            "Decisions per fault",
            _html.table(["Policy", "Decision", *faults], by_fault, numeric_from=2),
        ),
        _html.section(
            "families",
            "Unsafe completes per task family",
            _html.table(["Policy", *families], by_family),
        ),
        _html.section(
            "localisation",
            "ECT reason families per fault",
            _html.table(["Fault", "Reason families"], localisation, numeric_from=2),
        ),
        _html.section(
            "secondary",
            "Secondary endpoints: recoverable stuck and extra calls",
            _html.table(*secondary_table(results)) + _html.paragraph(_SECONDARY_NOTE),
        ),
        *(
            _html.section(f"endpoint-{index}", title, _html.table(*table))
            for index, (title, table) in enumerate(_breakdowns(results))
        ),
    ]
    return _html.page(
        title=f"Static study ({_split_name(results).lower()} grid): Tables 2 and 3, H1",
        banners=run_of(results).banners(),
        meta=[f"{run_of(results).line()}.", f"{results.tasks} tasks, {results.worlds} worlds, "
              f"{results.faults} fault and {results.cleans} clean snapshots.",
              f"{results.environment}."],
        sections=sections,
    )  # fmt: skip


def render_files(results: StaticResults) -> dict[str, bytes]:
    """Every report file's bytes: the tables, the figure (with the [plots] extra), the page and,
    last, the report manifest (``studies.report_manifest``: digests and the partial mark)."""
    texts: dict[str, bytes] = {}
    for stem, rendered in (
        ("table2", render_table2(results)),
        ("table3", render_table3(results)),
        ("endpoints", render_endpoints(results)),
    ):
        for ext, text in rendered.items():
            texts[f"{stem}.{ext}"] = text.encode("utf-8")
    if extra_installed("matplotlib"):
        from harness.studies.static.figure import render_figure  # matplotlib only when drawing

        texts.update(render_figure(results))
    texts = with_environment_header(texts, results.environment)
    texts["report.html"] = render_html(results, texts.get("ucr.png"))
    run = run_of(results)
    return with_manifest(
        texts, schema=REPORT_MANIFEST_SCHEMA, partial=run.partial, pilot=False, store=run
    )


def write_report(store_dir: Path, out: Path | None = None) -> StaticResults:
    """Load and check the static store ``store_dir``, analyse it, and write every table and
    the figure into ``out`` (default ``store_dir/report``).

    Returns:
        The results (the caller prints Table 2 and the H1 line).

    Raises:
        StoreNotFoundError: no store at ``store_dir``.
        TamperError: the store fails verification (exit 3); nothing is written.
        StudyKindError: the store is not a static study's.
        RunRecordsError: a record is not a static run's, or a report file cannot be written.
    """
    results = analyze(load_run(store_dir))
    target = out if out is not None else store_dir / REPORT_DIR
    texts = render_files(results)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunRecordsError(f"cannot create {str(target)!r}: {e.strerror}") from e
    if "ucr.png" not in texts:
        _log.warning(
            "static.report.no_figure", hint="install 'ect-harness[plots]' for ucr.png/.svg/.pdf"
        )
        for name in FIGURE_FILES:
            (target / name).unlink(missing_ok=True)  # never leave a figure of older results
    for name, data in texts.items():
        try:
            write_atomic(target / name, data)
        except OSError as e:
            raise RunRecordsError(f"cannot write {name} in {str(target)!r}: {e.strerror}") from e
    return results
