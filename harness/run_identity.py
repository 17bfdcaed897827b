"""Who ran a store and in what state, read once from its genesis, worded once.

Every report file of both studies (Markdown, HTML, CSV, TeX caption, figure, manifest), the
console's ``provider:`` lines and the audit name a run through ``read_identity`` and the
renderings of ``RunIdentity``; no other module reads the provider identity out of a genesis or
words it. Both studies bind a ``ProviderIdentity`` under ``identity.provider``; a V2 pilot binds
its ``PilotLabel`` under ``identity.pilot``. The fields:

- ``provider``: simulated, gemini or openai (``unknown``: a store made before genesis bound it);
- ``model``: the model asked for; ``simulated`` for the simulated provider, the word its
  attempts record;
- ``endpoint``: ``default`` for the provider's own public endpoint, the host (with its port) of
  any other, ``none`` for the simulated provider (no network);
- ``planner``: the planner plug-in's spec and source digest, or ``none``;
- ``credential``: ``key`` when a key was sent, ``none`` otherwise;
- ``state``: ``complete: N of N cells, finalized``, ``PARTIAL: K of N cells, not finalized``, a
  pilot's label, or a pilot's label and its partial state.

A Gemini run against any endpoint but Google's says so ("endpoint HOST:PORT, not Google's: a
rehearsal or a proxy") and is not the paper's frozen study; neither is a simulated run, another
provider or a planner plug-in (``not_frozen_study`` says why; it is empty only for the paper's
set-up). A partial store or a pilot carries no hypothesis verdict (``verdict_note``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from harness.errors import StudyReportError, V2StudyError
from harness.providers.endpoint import OPENAI_BASE_URL, PUBLIC_BASE_URL, endpoint_host
from harness.providers.kinds import ProviderName
from harness.providers.selection import ProviderIdentity
from harness.store import StoreView

__all__ = [
    "IDENTITY_COLUMNS",
    "PARTIAL_MARK",
    "PILOT_KEY",
    "PROVIDER_KEY",
    "SIMULATED_BANNER",
    "PilotLabel",
    "RunIdentity",
    "pilot_label",
    "provider_identity_of",
    "read_identity",
]

PROVIDER_KEY: Final = "provider"
"""Where both studies' genesis identities bind the ``ProviderIdentity``."""
PILOT_KEY: Final = "pilot"
"""Where a V2 pilot store's genesis identity binds its ``PilotLabel``."""
PARTIAL_MARK: Final = "PARTIAL: the store is not finalized"
"""How the warning of a report made on an unfinalized store begins, in every study; resume
removes such a report (it is stale once more cells are committed)."""
IDENTITY_COLUMNS: Final = ("provider", "model", "endpoint", "planner", "credential", "state")
"""The columns every report CSV ends with, in this order."""
SIMULATED_BANNER: Final = (
    "SIMULATED PROVIDER: every model answer in these results comes from the deterministic "
    "simulated provider, not from a language model; these are not the paper's Gemini numbers."
)
_DEFAULT_ENDPOINTS: Final = {
    ProviderName.GEMINI: PUBLIC_BASE_URL,
    ProviderName.OPENAI: OPENAI_BASE_URL,
}
_PAPER_MODEL: Final = "gemini-2.5-flash"


class PilotLabel(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a pilot store's genesis binds under ``identity.pilot``.

    Attributes:
        limit: ``--limit`` (the first K rows of the selection), or None.
        cells: the ``--cells`` patterns, in the order given (empty: every row).
        rows: how many schedule rows the pilot holds.
        of: how many rows the full study has.
    """

    limit: int | None
    cells: tuple[str, ...]
    rows: int
    of: int

    def describe(self) -> str:
        """``PILOT: 24 of 576 cells (--limit 24); not the study``."""
        how = []
        if self.limit is not None:
            how.append(f"--limit {self.limit}")
        how += [f"--cells {p}" for p in self.cells]
        return f"PILOT: {self.rows} of {self.of} cells ({' '.join(how)}); not the study"


def pilot_label(identity: Any) -> PilotLabel | None:
    """The pilot label of a genesis identity object (None: the full study).

    Raises:
        V2StudyError: the identity holds a ``pilot`` entry that is not a pilot label.
    """
    plain = identity.get(PILOT_KEY) if isinstance(identity, dict) else None
    if plain is None:
        return None
    try:
        return msgspec.convert(plain, PilotLabel)
    except msgspec.ValidationError as e:
        raise V2StudyError(f"the store's genesis holds no valid pilot label: {e}") from e


def provider_identity_of(view: StoreView) -> ProviderIdentity | None:
    """The provider identity a store's genesis binds (None: a store made before it was bound).

    Raises:
        StudyReportError: the genesis holds an identity that is not a provider identity.
    """
    plain = None if view.genesis is None else view.genesis.identity.get(PROVIDER_KEY)
    if not isinstance(plain, dict):
        return None
    try:
        return msgspec.convert(plain, ProviderIdentity, strict=False)
    except msgspec.ValidationError as e:
        raise StudyReportError(f"the store's genesis holds no valid provider identity: {e}") from e


class RunIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A run's identity and state as every report file names it (see the module docstring).

    ``pilot`` is the pilot label's text ("" for the whole study); ``cells`` and ``expected``
    are the committed and scheduled cells (snapshots for the static study) the state counts.
    """

    provider: str
    model: str
    endpoint: str
    planner: str
    credential: str
    state: str
    simulated: bool
    partial: bool
    pilot: str
    cells: int
    expected: int
    unit: str
    not_frozen_study: str

    @property
    def endpoint_note(self) -> str:
        """``endpoint HOST:PORT, not Google's: a rehearsal or a proxy`` for a Gemini run
        against any endpoint but Google's ("" otherwise)."""
        if self.provider != ProviderName.GEMINI.value or self.endpoint in ("default", "unknown"):
            return ""
        return f"endpoint {self.endpoint}, not Google's: a rehearsal or a proxy"

    def who(self) -> str:
        """``gemini; model gemini-2.5-flash; endpoint default; planner none; credential key``
        (the simulated provider and a foreign Gemini endpoint say so): what follows
        ``provider:`` on the console."""
        provider = self.provider
        if self.simulated:
            provider += " (SIMULATED, not a language model)"
        endpoint = self.endpoint_note or f"endpoint {self.endpoint}"
        return (
            f"{provider}; model {self.model}; {endpoint}; planner {self.planner}; "
            f"credential {self.credential}"
        )

    def line(self) -> str:
        """The one line every report file carries: who ran the store and its state."""
        return f"Run: provider {self.who()}; {self.state}"

    def columns(self) -> list[str]:
        """The values of ``IDENTITY_COLUMNS``."""
        return [self.provider, self.model, self.endpoint, self.planner, self.credential, self.state]

    @property
    def evaluated(self) -> bool:
        """True when hypotheses are evaluated: a finalized full store, not a pilot."""
        return not self.partial and not self.pilot

    def verdict_note(self) -> str:
        """Why no hypothesis verdict is given ("" when one is): ``not evaluated: 47 of 576
        cells`` on partial data, the pilot's label on a pilot."""
        if self.pilot:
            return f"not evaluated: {self.pilot}"
        if self.partial:
            return f"not evaluated: {self.cells} of {self.expected} {self.unit}"
        return ""

    def marks(self) -> list[str]:
        """Short warnings for a figure's title (the caption carries the whole line)."""
        out = []
        if self.simulated:
            out.append("SIMULATED provider, not an LLM")
        elif self.endpoint_note:
            out.append(f"endpoint {self.endpoint}, not Google's")
        elif self.not_frozen_study:
            out.append("not the paper's frozen study")
        if self.pilot:
            out.append(self.pilot.split(" (", 1)[0].split(";", 1)[0])
        if self.partial:
            out.append(f"PARTIAL: {self.cells} of {self.expected} {self.unit}")
        return out

    def banners(self) -> list[str]:
        """The warnings a report shows above its tables, most fundamental first."""
        out = []
        if self.simulated:
            out.append(SIMULATED_BANNER)
        # The simulated provider's own banner says enough, unless a plug-in planned too.
        if self.not_frozen_study and (not self.simulated or self.planner != "none"):
            out.append(self.not_frozen_study)
        if self.pilot:
            out.append(
                f"{self.pilot}. A pilot runs a subset of the schedule; no hypothesis verdict."
            )
        if self.partial:
            out.append(
                f"{PARTIAL_MARK}; only {self.cells} of {self.expected} {self.unit} are "
                "committed, so these are not the study's numbers and no hypothesis is evaluated "
                "(resuming the run supersedes this report)."
            )
        return out


def _endpoint(identity: ProviderIdentity) -> str:
    if identity.provider is ProviderName.SIMULATED or identity.endpoint is None:
        return "none"
    default = _DEFAULT_ENDPOINTS.get(identity.provider)
    if default is not None and identity.endpoint.rstrip("/") == default.rstrip("/"):
        return "default"
    return endpoint_host(identity.endpoint)


def _not_frozen(identity: ProviderIdentity | None, who: str, endpoint_note: str) -> str:
    if identity is None:
        return "NOT THE PAPER'S FROZEN STUDY: the store's genesis names no provider."
    if identity.provider is ProviderName.SIMULATED and identity.planner is None:
        return "NOT THE PAPER'S FROZEN STUDY: the provider is simulated, not a language model."
    if identity.provider is ProviderName.GEMINI and identity.planner is None:
        return f"NOT THE PAPER'S FROZEN STUDY: {endpoint_note}." if endpoint_note else ""
    return (
        f"NOT THE PAPER'S FROZEN STUDY: the run used provider {who}; the paper's study ran "
        f"{_PAPER_MODEL} at Google's endpoint with no planner plug-in. The protocol is the same."
    )


def _pilot(label: PilotLabel | None, rows: int, frozen_rows: int | None) -> str:
    if label is not None:
        return label.describe()
    if frozen_rows is not None and rows < frozen_rows:
        return f"PILOT: {rows} of the {frozen_rows} rows of the frozen schedule; not the study"
    return ""


def _state(pilot: str, partial: bool, cells: int, rows: int, unit: str) -> str:
    done = (
        f"PARTIAL: {cells} of {rows} {unit}, not finalized"
        if partial
        else f"complete: {cells} of {rows} {unit}, finalized"
    )
    return f"{pilot}; {done}" if pilot else done


def read_identity(
    view: StoreView,
    *,
    unit: str = "cells",
    frozen_rows: int | None = None,
    fallback_provider: str | None = None,
    fallback_simulated: bool = False,
) -> RunIdentity:
    """The run identity of the store ``view`` (see the module docstring).

    ``frozen_rows``: rows of the frozen schedule the store's lock covers (a V2 store with fewer
    rows and no pilot label is a pilot too). ``fallback_provider``/``fallback_simulated``: what
    a store made before genesis bound its provider shows in its results.

    Raises:
        StudyReportError: the genesis holds a provider identity that does not decode.
        V2StudyError: the genesis holds a pilot entry that is not a pilot label.
    """
    identity = provider_identity_of(view)
    label = None if view.genesis is None else pilot_label(view.genesis.identity)
    report = view.report
    partial = not report.finalized or report.cells < report.schedule_rows
    pilot = _pilot(label, report.schedule_rows, frozen_rows)
    if identity is None:
        provider = fallback_provider or "unknown"
        simulated = fallback_simulated or provider == ProviderName.SIMULATED.value
        model = endpoint = planner = credential = "unknown"
        if simulated:
            model, endpoint, planner, credential = "simulated", "none", "none", "none"
    else:
        simulated = identity.provider is ProviderName.SIMULATED
        provider = identity.provider.value
        model = "simulated" if simulated else str(identity.model)
        endpoint = _endpoint(identity)
        planner = (
            "none"
            if identity.planner is None
            else f"{identity.planner.spec} ({identity.planner.digest})"
        )
        if simulated:
            credential = "none"
        elif identity.provider is ProviderName.OPENAI:
            credential = identity.credential or "key"
        else:
            credential = "key"
    run = RunIdentity(
        provider=provider,
        model=model,
        endpoint=endpoint,
        planner=planner,
        credential=credential,
        state=_state(pilot, partial, report.cells, report.schedule_rows, unit),
        simulated=simulated,
        partial=partial,
        pilot=pilot,
        cells=report.cells,
        expected=report.schedule_rows,
        unit=unit,
        not_frozen_study="",
    )
    # The frozen-study note names the run with the same words as every other line.
    return msgspec.structs.replace(
        run, not_frozen_study=_not_frozen(identity, run.who(), run.endpoint_note)
    )
