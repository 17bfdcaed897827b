"""A static checker for the Seatbelt profile (SBPL): its deny-default shape, read as data.

``sandbox-exec`` cannot run here, so the profile's shape is checked without it: the text is
parsed into S-expressions (comments, strings, symbols, lists) and every top-level rule is held
against what the tool sandbox allows. A profile passes only if all of these hold:

- it starts with ``(version 1)`` and has ``(deny default)``; nothing allows ``default``;
- every top-level form is ``version``, ``deny`` or ``allow`` (no ``import``, ``define`` ...);
- no rule names a network, socket, mach, IPC, fork, signal or sysctl-write operation;
- writes are allowed only to ``(literal "/dev/null")``;
- exec is allowed only under ``(param "INTERPRETER_PREFIX")``;
- every path filter is ``literal`` or ``subpath`` of a ``(param ...)`` or of a listed system
  path (no ``regex``, no ``prefix``, no home or temporary directory), and ``/`` only as a
  literal node;
- only ``file-read-metadata`` and ``sysctl-read`` are allowed without a filter;
- the parameters used are exactly those the backend passes.

It does not evaluate the profile or prove the child can run under it; on macOS the probes
and the positive control do that.
"""

from __future__ import annotations

from typing import Final

from harness.errors import SbplSyntaxError

__all__ = [
    "ALLOWED_OPERATIONS",
    "PROFILE_PARAMS",
    "SYSTEM_READ_PATHS",
    "Atom",
    "Expr",
    "SbplSyntaxError",
    "check_profile",
    "parse_sbpl",
]

PROFILE_PARAMS: Final = frozenset({"INTERPRETER_PREFIX", "TOOL_CODE", "RUN_FILE"})
SYSTEM_READ_PATHS: Final = frozenset(
    {"/", "/usr/lib", "/System", "/Library/Apple", "/dev/urandom", "/dev/null"}
)
ALLOWED_OPERATIONS: Final = frozenset(
    {"process-exec", "file-read*", "file-read-data", "file-read-metadata", "file-write*"}
    | {"sysctl-read"}
)
_UNFILTERED_OK: Final = frozenset({"file-read-metadata", "sysctl-read"})
_WRITE_OPS: Final = frozenset({"file-write*", "file-write-data", "file-write-create"})


class Atom(str):
    """A bare symbol (``deny``, ``file-read*``), as distinct from a string literal."""


Expr = str | Atom | list["Expr"]


def _tokens(text: str) -> list[str | Atom]:
    out: list[str | Atom] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c == ";":
            while i < n and text[i] != "\n":
                i += 1
        elif c in "()":
            out.append(Atom(c))
            i += 1
        elif c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise SbplSyntaxError(f"unterminated string at offset {i}")
            out.append("".join(buf))
            i = j + 1
        else:
            j = i
            while j < n and text[j] not in ' \t\r\n()";':
                j += 1
            out.append(Atom(text[i:j]))
            i = j
    return out


def parse_sbpl(text: str) -> list[Expr]:
    """Parse SBPL text into top-level expressions.

    Raises:
        SbplSyntaxError: on unbalanced parentheses or an unterminated string.
    """
    stack: list[list[Expr]] = [[]]
    for tok in _tokens(text):
        if isinstance(tok, Atom) and tok == "(":
            stack.append([])
        elif isinstance(tok, Atom) and tok == ")":
            if len(stack) == 1:
                raise SbplSyntaxError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise SbplSyntaxError("unbalanced '('")
    return stack[0]


def _head(expr: Expr) -> str | None:
    if isinstance(expr, list) and expr and isinstance(expr[0], Atom):
        return str(expr[0])
    return None


def _render(expr: Expr) -> str:
    if isinstance(expr, list):
        return "(" + " ".join(_render(e) for e in expr) + ")"
    if isinstance(expr, Atom):
        return str(expr)
    return '"' + expr + '"'


def _path_value(arg: Expr, params: set[str], problems: list[str], where: str) -> str | None:
    """A filter's path argument: a system literal path or ``(param "NAME")``."""
    if isinstance(arg, list):
        if _head(arg) == "param" and len(arg) == 2 and type(arg[1]) is str:
            name = arg[1]
            params.add(name)
            if name not in PROFILE_PARAMS:
                problems.append(f"{where}: unknown parameter {name!r}")
            return f"param:{name}"
        problems.append(f"{where}: a path must be a string or (param ...), got {_render(arg)}")
        return None
    if isinstance(arg, Atom):
        problems.append(f"{where}: a path must be a string or (param ...), got {arg}")
        return None
    if arg not in SYSTEM_READ_PATHS:
        problems.append(f"{where}: literal path {arg!r} is not a listed system path")
    return arg


def _filters(
    rule: list[Expr], params: set[str], problems: list[str], where: str
) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for f in rule[2:]:
        kind = _head(f)
        if kind in ("literal", "subpath") and isinstance(f, list) and len(f) == 2:
            found.append((kind, _path_value(f[1], params, problems, where)))
        else:
            problems.append(f"{where}: filter {_render(f)} is not (literal P) or (subpath P)")
    return found


def check_profile(text: str) -> list[str]:  # noqa: C901 - one check per rule of the profile shape, each reported
    """Return every way ``text`` departs from the tool sandbox's Seatbelt shape (empty: fine)."""
    try:
        forms = parse_sbpl(text)
    except SbplSyntaxError as e:
        return [f"not well-formed: {e}"]
    problems: list[str] = []
    if not forms or forms[0] != [Atom("version"), Atom("1")]:
        problems.append("the profile must start with (version 1)")
    if [Atom("deny"), Atom("default")] not in forms:
        problems.append("the profile has no (deny default)")
    params: set[str] = set()
    for index, form in enumerate(forms):
        where = f"form {index + 1} {_render(form)[:60]}"
        head = _head(form)
        if head == "version" and index == 0:
            continue
        if head == "deny":
            continue
        if head != "allow" or not isinstance(form, list) or len(form) < 2:
            problems.append(f"{where}: only (version 1), (deny ...) and (allow ...) may appear")
            continue
        op = form[1]
        if not isinstance(op, Atom):
            problems.append(f"{where}: the operation must be a symbol")
            continue
        if op == "default":
            problems.append(f"{where}: allows default")
            continue
        if op not in ALLOWED_OPERATIONS:
            problems.append(f"{where}: operation {op} is not allowed in the tool sandbox")
            continue
        filters = _filters(form, params, problems, where)
        if not filters:
            if op not in _UNFILTERED_OK:
                problems.append(f"{where}: {op} is allowed everywhere")
            continue
        if ("subpath", "/") in filters:
            problems.append(f'{where}: the root may be a (literal "/") node, never a subpath')
        if op in _WRITE_OPS and filters != [("literal", "/dev/null")]:
            problems.append(f'{where}: writes may go only to (literal "/dev/null")')
        if op == "process-exec" and filters != [("subpath", "param:INTERPRETER_PREFIX")]:
            problems.append(f'{where}: exec is allowed only under (param "INTERPRETER_PREFIX")')
    missing = PROFILE_PARAMS - params
    if missing:
        problems.append(f"parameters never used: {', '.join(sorted(missing))}")
    return problems
