"""The proxy itself: an MCP server in front of MCP upstreams, gating ``submit`` (needs ``mcp``).

``Proxy`` connects to every upstream as a client (``mcp.Client``: a command over stdio or a URL
over streamable HTTP; either protocol era), lists all their tools, and serves a low-level
``mcp.server.Server`` whose tools are the upstreams' under collision-free names (schemas
unchanged) plus the submit tool. A call is forwarded as a raw ``tools/call`` (no re-validation,
no field dropped), with progress relayed and cancellation passed on; only a *completed* result
becomes receipts. A protocol error, a timeout, a dead upstream, an invalid or oversized result
is an error result to the model and a line in the run log, never a receipt and never a crash.

One ledger per agent run: per connection on stdio (one process per client) and in memory; per
``ect-episode`` header over HTTP, where a request without one is refused.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
import msgspec
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    ListToolsRequest,
    PaginatedRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from harness.errors import ExportError, UpstreamError
from harness.gate import GateContract
from harness.log import get_logger
from harness.mcp_proxy.episode import Episode, new_episode_dir
from harness.mcp_proxy.naming import (
    DEFAULT_SUBMIT_TOOL,
    EPISODE_HEADER,
    ExposedTool,
    Upstream,
    check_episode,
    expose,
)
from harness.mcp_proxy.results import (
    error_result,
    forwarded_result,
    result_document,
    result_problem,
    submit_result,
    submit_schema,
)

__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_MAX_RESULT_BYTES", "Proxy"]

DEFAULT_CALL_TIMEOUT: Final = 300.0
DEFAULT_MAX_RESULT_BYTES: Final = 32 * 1024 * 1024
_MAX_PAGES: Final = 100
_RAW: Final = TypeAdapter(dict[str, Any])
# The 2026 revision's result envelope (never cached: the proxy's listing is per run); the SDK
# drops these fields for a client of an earlier revision.
_LIST_ENVELOPE: Final = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
_CALL_ENVELOPE: Final = {"resultType": "complete"}
_log = get_logger("harness.mcp_proxy")


class _Link:
    """One upstream: its client, the tools it listed, whether it is still usable."""

    def __init__(self, spec: Upstream) -> None:
        self.spec = spec
        self.client: Client | None = None
        self.tools: list[dict[str, Any]] = []
        self.gone: str | None = None


class _Connection:
    """Per-connection state (stdio, in memory): the episode, made on the first call."""

    def __init__(self) -> None:
        self.episode: Episode | None = None


def _one_line(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]  # the SDK's task groups wrap the failure that matters
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


class Proxy:
    """The proxy (see the module docstring). Use ``async with Proxy(...) as proxy``, then serve
    ``proxy.server`` (stdio, in memory) or ``proxy.http_app()``.

    Args:
        contract: the gate contract (descriptor, requirements, extractors, refusal budget).
        upstreams: the upstream servers.
        run_dir: where each episode's directory is made.
        submit_tool: the submit tool's name.
        call_timeout: seconds an upstream may take for one call.
        max_result_bytes: the largest result (as JSON) forwarded and recorded.
        errlog: where stdio upstreams' stderr goes.
    """

    def __init__(
        self,
        contract: GateContract,
        upstreams: Sequence[Upstream],
        run_dir: Path,
        *,
        submit_tool: str = DEFAULT_SUBMIT_TOOL,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        errlog: TextIO | None = None,
    ) -> None:
        self.contract = contract
        self.run_dir = run_dir
        self.submit_tool = submit_tool
        self.call_timeout = call_timeout
        self.max_result_bytes = max_result_bytes
        self._errlog = errlog if errlog is not None else sys.stderr
        self._links = {u.name: _Link(u) for u in upstreams}
        self._exposed: dict[str, tuple[ExposedTool, dict[str, Any]]] = {}
        self._episodes: dict[str, Episode] = {}
        self._stack: AsyncExitStack | None = None
        self._stop = anyio.Event()
        self.http = False
        self.server: Server[_Connection] = Server(
            "ect-proxy",
            version="1",
            instructions=(
                f"Tool results carry ECT receipt ids. Finish only with {submit_tool}: claims "
                "citing receipt ids, and the answer."
            ),
            lifespan=self._lifespan,
        )
        # No tracing span per message: the proxy's own log is its record (and a span costs time
        # on every forwarded call).
        self.server.middleware = []
        # Registered as plain handlers: they return the upstreams' JSON as dicts, unmodelled.
        self.server.add_request_handler("tools/list", PaginatedRequestParams, self._list_tools)
        self.server.add_request_handler("tools/call", CallToolRequestParams, self._call_tool)

    # -- upstreams -------------------------------------------------------------------------

    async def __aenter__(self) -> Proxy:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._stop.set)  # runs before the group waits for the links
            for link in self._links.values():
                await tg.start(self._hold, link)
        except BaseException:
            await stack.__aexit__(*sys.exc_info())
            raise
        self._stack = stack
        self._name_tools()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close_runs()
        if self._stack is not None:
            await self._stack.__aexit__(None, None, None)

    def close_runs(self) -> None:
        """Complete every open run's files (record.json, the log): the proxy is stopping."""
        for episode in self._episodes.values():
            episode.close()

    async def _hold(self, link: _Link, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep one upstream connected until the proxy stops; its later failure is logged."""
        started = False
        try:
            # The timeout bounds every request, the handshake included: an upstream that never
            # answers fails the start instead of hanging it.
            timeout = self.call_timeout
            if link.spec.url is not None:
                client = Client(link.spec.url, read_timeout_seconds=timeout)
            else:
                argv = link.spec.argv
                target = StdioServerParameters(command=argv[0], args=list(argv[1:]))
                transport = stdio_client(target, errlog=self._errlog)
                client = Client(transport, read_timeout_seconds=timeout)
            async with client:
                link.client = client
                link.tools = await self._list_all(client)
                started = True
                task_status.started()
                await self._stop.wait()
        except Exception as e:  # noqa: BLE001 - an upstream failing is reported, never a crash
            if not started:
                raise UpstreamError(
                    f"upstream {link.spec.name} could not be started or listed: {_one_line(e)}"
                ) from None
            link.gone = _one_line(e)
            _log.warning("mcp_proxy.upstream_gone", upstream=link.spec.name, reason=link.gone)
        finally:
            link.client = None
            if link.gone is None and started and not self._stop.is_set():
                link.gone = "the connection ended"

    async def _list_all(self, client: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.session.send_request(
                ListToolsRequest(params=PaginatedRequestParams(cursor=cursor)),
                _RAW,  # type: ignore[type-var]  # a raw dict: the SDK's models drop fields
                request_read_timeout_seconds=self.call_timeout,
            )
            tools.extend(t for t in page.get("tools", []) if isinstance(t, dict))
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str):
                return tools
        raise UpstreamError(f"more than {_MAX_PAGES} pages of tools")

    def _name_tools(self) -> None:
        listed = [
            (name, str(tool.get("name", "")))
            for name, link in self._links.items()
            for tool in link.tools
        ]
        by_key = {
            (name, str(tool.get("name", ""))): tool
            for name, link in self._links.items()
            for tool in link.tools
        }
        exposed, skipped = expose(listed, self.submit_tool)
        for line in skipped:
            _log.warning("mcp_proxy.tool_skipped", detail=line)
        self._exposed = {t.name: (t, by_key[(t.upstream, t.tool)]) for t in exposed}
        evidence = {t.tool_id for t in self.contract.tools}
        missing = sorted(evidence - set(self._exposed))
        if missing:
            _log.warning("mcp_proxy.contract_tool_not_offered", tools=missing)

    @property
    def exposed(self) -> Mapping[str, ExposedTool]:
        """Exposed name -> the upstream tool behind it."""
        return {name: t for name, (t, _) in self._exposed.items()}

    # -- episodes --------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self, _server: Server[_Connection]) -> AsyncIterator[_Connection]:
        conn = _Connection()
        try:
            yield conn
        finally:
            if conn.episode is not None:  # the run's connection closed: its files are final
                conn.episode.close()
                self._episodes.pop(str(conn.episode.directory), None)

    def _episode(self, ctx: ServerRequestContext[_Connection, Any]) -> Episode | str:
        """The request's episode, or why there is none."""
        if self.http:
            headers = getattr(ctx.request, "headers", None)
            raw = headers.get(EPISODE_HEADER) if headers is not None else None
            name = check_episode(raw)
            if name is None:
                return (
                    f"this proxy serves HTTP requests only with an {EPISODE_HEADER} header "
                    "(1-64 of A-Z a-z 0-9 _ -) naming the agent run"
                )
            episode = self._episodes.get(name)
            if episode is None:
                try:
                    episode = Episode(self.contract, new_episode_dir(self.run_dir, name))
                except ExportError as e:
                    return str(e)
                self._episodes[name] = episode
            return episode
        conn = ctx.lifespan_context
        if conn.episode is None:
            try:
                conn.episode = Episode(self.contract, new_episode_dir(self.run_dir, None))
            except ExportError as e:
                return str(e)
            self._episodes[str(conn.episode.directory)] = conn.episode
        return conn.episode

    # -- handlers --------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[_Connection, Any], params: PaginatedRequestParams
    ) -> dict[str, Any]:
        tools = [{**tool, "name": name} for name, (_, tool) in self._exposed.items()]
        tools.append(
            {
                "name": self.submit_tool,
                "description": (
                    "Finish the task. Give `claims` (one per required slot: slot, value, the "
                    "receipt ids it rests on as `evidence`, and the `transform`) and `answer` "
                    "(slot -> value). The answer counts only if the gate certifies it; a refusal "
                    "says why and what to do."
                ),
                "inputSchema": submit_schema(),
            }
        )
        return {"tools": tools, **_LIST_ENVELOPE}

    async def _call_tool(
        self, ctx: ServerRequestContext[_Connection, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        return {**await self._answer(ctx, params), **_CALL_ENVELOPE}

    async def _answer(
        self, ctx: ServerRequestContext[_Connection, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        episode = self._episode(ctx)
        if isinstance(episode, str):
            _log.warning("mcp_proxy.refused", tool=params.name, reason=episode)
            return error_result(f"Refused: {episode}.")
        args = dict(params.arguments or {})
        if params.name == self.submit_tool:
            decision = episode.submit(args.get("claims"), args.get("answer"))
            return submit_result(decision)
        found = self._exposed.get(params.name)
        if found is None:
            return error_result(f"No tool {params.name!r} behind this proxy.")
        terminal = episode.session.terminal
        if terminal is not None:
            return error_result(
                f"This run has ended ({terminal.verdict.value}): no more tool calls are forwarded."
            )
        tool, _ = found
        raw = await self._forward(ctx, tool, args, episode)
        if isinstance(raw, str):
            return error_result(raw)
        recorded = episode.record(tool.name, tool.upstream, args, result_document(raw))
        legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        return forwarded_result(raw, recorded, object_structured_only=legacy)

    async def _forward(
        self,
        ctx: ServerRequestContext[_Connection, Any],
        tool: ExposedTool,
        args: dict[str, Any],
        episode: Episode,
    ) -> dict[str, Any] | str:
        """The upstream's completed result, or the line the model reads for a failed call."""
        link = self._links[tool.upstream]
        client = link.client
        if client is None:
            why = f"upstream {tool.upstream} is gone ({link.gone or 'not connected'})"
            episode.log("call_failed", tool=tool.name, upstream=tool.upstream, reason=why)
            return f"The call failed: {why}. No receipt was recorded."
        request = CallToolRequest(params=CallToolRequestParams(name=tool.tool, arguments=args))
        try:
            raw = await client.session.send_request(
                request,
                _RAW,  # type: ignore[type-var]  # a raw dict: the SDK's models drop fields
                request_read_timeout_seconds=self.call_timeout,
                # Relayed always: on the in-process 2026 path a client's wish for progress is not
                # in the request's _meta, and report_progress is a no-op for a client without it.
                progress_callback=ctx.session.report_progress,
            )
            size = len(msgspec.json.encode(raw))
            problem = result_problem(raw, size, self.max_result_bytes)
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                problem = f"upstream {tool.upstream} did not answer within {self.call_timeout:g} s"
            elif e.code == CONNECTION_CLOSED:
                problem = f"upstream {tool.upstream} is gone ({_one_line(e)})"
            else:
                problem = f"upstream {tool.upstream} answered with an error: {_one_line(e)}"
        except ValidationError as e:
            problem = f"upstream {tool.upstream} sent an invalid result ({e.error_count()} errors)"
        except (msgspec.EncodeError, ValueError, TypeError, OverflowError) as e:
            problem = f"upstream {tool.upstream} sent a result that is not JSON: {_one_line(e)}"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as e:
            problem = f"upstream {tool.upstream} is unreachable: {_one_line(e) or type(e).__name__}"
        if problem is not None:
            episode.log("call_failed", tool=tool.name, upstream=tool.upstream, reason=problem)
            _log.warning("mcp_proxy.call_failed", tool=tool.name, reason=problem)
            return f"The call failed: {problem}. No receipt was recorded."
        return raw

    # -- HTTP ------------------------------------------------------------------------------

    def http_app(self) -> Any:
        """The streamable HTTP app (at ``/mcp``), refusing requests without the episode header."""
        self.http = True
        app = self.server.streamable_http_app()
        return _EpisodeGuard(app)


class _EpisodeGuard:
    """ASGI middleware: a POST without a valid episode header is a 400 with one JSON-RPC line."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST":
            key = EPISODE_HEADER.encode()
            value = next((v for k, v in scope.get("headers", []) if k.lower() == key), None)
            if check_episode(value.decode("latin-1") if value is not None else None) is None:
                body = msgspec.json.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": -32600,
                            "message": f"missing or invalid {EPISODE_HEADER} header: the "
                            "harness names each agent run with it",
                        },
                    }
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
