"""The MCP proxy in process: real upstream subprocesses over stdio, the SDK's own clients.

Both protocol eras the SDK speaks are driven in memory (``mode="legacy"``: the initialize
handshake; ``"auto"``: the 2026-07-28 envelope). The upstreams are ours: the benchmark's tools
(``harness.mcp_proxy.benchmark``) and a toy server (``mcp_toys.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from gate_support import CallAction, Script, Seen, task_by_id
from mcp import Client
from mcp_support import (
    BENCH_ONLY,
    ERAS,
    TOYS_ONLY,
    first_text,
    last_text,
    receipt_ids,
    running_proxy,
)
from mcp_toys import TOOLS, toys_contract

from harness.gate import GateRecord, reverify
from harness.mcp_proxy.benchmark import benchmark_contract, benchmark_server
from harness.worlds import build_tasks, generate_world

CITE = ["c01.0", "c02.0", "c03.0"]
ARGMAX = {"op": "argmax", "key": "entity"}
HONEST = {"total_visits": 293, "busiest_site": "site-a"}


def _claims(evidence: list[str], total: int = 293) -> list[dict[str, Any]]:
    return [
        {"slot": "total_visits", "value": total, "evidence": evidence, "transform": {"op": "sum"}},
        {"slot": "busiest_site", "value": "site-a", "evidence": evidence, "transform": ARGMAX},
    ]


def _record(directory: Path) -> GateRecord:
    return msgspec.json.decode((directory / "record.json").read_bytes(), type=GateRecord)


def _events(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (directory / "log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("mode", ERAS)
def test_every_upstream_tool_is_exposed_under_a_free_name_with_its_schemas(
    tmp_path: Path, mode: str
) -> None:
    async def body() -> None:
        async with (
            running_proxy(toys_contract(), tmp_path) as proxy,
            Client(proxy.server, mode=mode) as client,
        ):
            listed = {t.name: t for t in (await client.list_tools()).tools}
            exposed = dict(proxy.exposed)
        bench = {t["name"]: t for t in (await _bench_tools())}
        toys = {t["name"]: t for t in TOOLS}
        expected = {
            *(n for n in bench if n != "describe_world"),
            *(n for n in toys if n not in ("describe_world", "ect_submit")),
            "bench__describe_world",
            "toys__describe_world",
            "toys__ect_submit",
            "ect_submit",
        }
        assert set(listed) == expected
        assert set(exposed) == expected - {"ect_submit"}
        for name, behind in exposed.items():
            source = (bench if behind.upstream == "bench" else toys)[behind.tool]
            assert listed[name].input_schema == source["inputSchema"]
            assert listed[name].output_schema == source.get("outputSchema")
        assert listed["ect_submit"].input_schema["required"] == ["claims", "answer"]

    anyio.run(body)


async def _bench_tools() -> list[dict[str, Any]]:
    async with Client(benchmark_server("00"), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    return [t.model_dump(by_alias=True, exclude_none=True) for t in tools]


@pytest.mark.parametrize("mode", ERAS)
def test_a_scripted_agent_is_refused_three_ways_then_certified(tmp_path: Path, mode: str) -> None:
    async def body() -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        async with (
            running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode=mode) as client,
        ):
            ids = []
            for site in ("site-a", "site-b", "site-c", "site-d"):
                result = await client.call_tool("site_visits", {"site": site})
                assert not result.is_error
                ids += receipt_ids(result)
                assert ids[-1] in last_text(result)
            assert ids == ["c01.0", "c02.0", "c03.0", "c04.0"]
            submit = [
                ({"claims": _claims([]), "answer": HONEST}),  # no evidence
                ({"claims": _claims(["c01.0", "c02.0", "c04.0"]), "answer": HONEST}),  # scope
                ({"claims": _claims(CITE), "answer": {**HONEST, "total_visits": 290}}),  # altered
                ({"claims": _claims(CITE), "answer": HONEST}),  # honest
            ]
            for args in submit:
                result = await client.call_tool("ect_submit", args)
                out.append((bool(result.is_error), first_text(result)))
            after = await client.call_tool("site_visits", {"site": "site-a"})
            assert after.is_error
            assert "This run has ended (complete)" in last_text(after)
        return out

    results = anyio.run(body)
    assert [error for error, _ in results] == [True, True, True, False]
    assert "EVIDENCE_EMPTY" in results[0][1]
    assert "What to do" in results[0][1]
    assert "SCOPE_ENTITY" in results[1][1]
    assert "REPLAY_ANSWER_MISMATCH" in results[2][1]
    assert results[3][1].endswith('Certified answer: {"busiest_site":"site-a","total_visits":293}')

    run = tmp_path / "runs" / "run-01"
    record = _record(run)
    assert [s.verdict.value for s in record.submissions] == [
        "continue",
        "continue",
        "continue",
        "complete",
    ]
    assert all(r.agrees for r in reverify(record))
    assert [e["event"] for e in _events(run)] == ["call"] * 4 + ["submit"] * 4
    for n, code in ((3, 1), (4, 0)):
        sub = run / f"submission-{n:02d}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "verify",
                "--descriptor",
                str(run / "descriptor.json"),
                "--requirements",
                str(run / "requirements.json"),
                "--ledger",
                str(sub / "ledger.json"),
                "--certificate",
                str(sub / "certificate.json"),
                "--answer",
                str(sub / "answer.json"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == code, done.stderr


def test_an_upstream_error_result_is_a_receipt_no_claim_may_use(tmp_path: Path) -> None:
    async def body() -> tuple[Any, Any]:
        async with (
            running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode="legacy") as client,
        ):
            failed = await client.call_tool("site_visits", {"site": "site-a", "fail": True})
            for site in ("site-b", "site-c"):
                await client.call_tool("site_visits", {"site": site})
            refused = await client.call_tool(
                "ect_submit", {"claims": _claims(CITE), "answer": HONEST}
            )
        return failed, refused

    failed, refused = anyio.run(body)
    assert failed.is_error  # forwarded as the upstream sent it
    assert receipt_ids(failed) == ["c01.0"]
    assert "the call failed: no claim may cite it" in last_text(failed)
    assert refused.is_error
    assert "EVIDENCE_UNSUCCESSFUL" in first_text(refused)
    receipt = _record(tmp_path / "runs" / "run-01").calls[0].receipts[0]
    assert (receipt.exec_status, receipt.value) == ("error", 120)


@pytest.mark.parametrize("mode", ERAS)
def test_progress_is_relayed(tmp_path: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def body() -> None:
        async with (
            running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode=mode) as client,
        ):
            result = await client.call_tool("slow", {}, progress_callback=progress)
            assert first_text(result) == "done"

    anyio.run(body)
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("mode", ERAS)
def test_a_cancelled_call_reaches_the_upstream_and_leaves_no_receipt(
    tmp_path: Path, mode: str
) -> None:
    marker = tmp_path / "cancelled"

    async def body() -> None:
        async with (
            running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode=mode) as client,
        ):
            with anyio.move_on_after(1.0) as scope:
                await client.call_tool("hang", {"marker": str(marker)})
            assert scope.cancelled_caught
            with anyio.fail_after(20):
                while not marker.exists():  # noqa: ASYNC110 - another process writes it
                    await anyio.sleep(0.05)
            after = await client.call_tool("site_visits", {"site": "site-a"})
            assert receipt_ids(after) == ["c01.0"]

    anyio.run(body)
    record = _record(tmp_path / "runs" / "run-01")
    assert [c.tool_id for c in record.calls] == ["site_visits"]
    events = _events(tmp_path / "runs" / "run-01")
    assert [e["recorded"]["tool_id"] for e in events] == ["site_visits"]


def test_a_20_mb_result_is_forwarded_whole(tmp_path: Path) -> None:
    async def body() -> Any:
        async with (
            running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode="legacy") as client,
        ):
            return await client.call_tool("big", {"mb": 20})

    result = anyio.run(body)
    assert len(first_text(result)) == 20 * 1024 * 1024
    assert result.structured_content == {"size": 20 * 1024 * 1024}
    assert "no receipt (not an evidence tool)" in last_text(result)


def test_an_oversized_result_is_an_error_and_no_receipt(tmp_path: Path) -> None:
    async def body() -> Any:
        async with (
            running_proxy(
                toys_contract(), tmp_path, TOYS_ONLY, max_result_bytes=1024 * 1024
            ) as proxy,
            Client(proxy.server, mode="legacy") as client,
        ):
            return await client.call_tool("big", {"mb": 2})

    result = anyio.run(body)
    assert result.is_error
    assert "over the proxy's limit of 1048576" in first_text(result)
    run = tmp_path / "runs" / "run-01"
    assert _record(run).calls == ()
    assert [e["event"] for e in _events(run)] == ["call_failed"]


def test_a_protocol_error_a_timeout_and_a_dead_upstream_are_error_results(
    tmp_path: Path,
) -> None:
    async def body() -> list[Any]:
        out = []
        async with (
            running_proxy(toys_contract(), tmp_path, call_timeout=2.0) as proxy,
            Client(proxy.server, mode="legacy") as client,
        ):
            out.append(await client.call_tool("broken", {}))
            out.append(await client.call_tool("hang", {"marker": str(tmp_path / "m")}))
            out.append(await client.call_tool("die", {}))
            out.append(await client.call_tool("site_visits", {"site": "site-a"}))
            out.append(await client.call_tool("get_parent", {"entity": "R1"}))  # bench lives on
        return out

    broken, hung, died, after, bench = anyio.run(body)
    for result in (broken, hung, died, after):
        assert result.is_error
        assert "No receipt was recorded." in first_text(result)
    assert "upstream toys answered with an error" in first_text(broken)
    assert "upstream toys did not answer within 2 s" in first_text(hung)
    assert "upstream toys is gone" in first_text(died)
    assert "upstream toys is gone" in first_text(after)
    assert not bench.is_error
    run = tmp_path / "runs" / "run-01"
    assert [c.tool_id for c in _record(run).calls] == ["get_parent"]
    assert [e["event"] for e in _events(run)] == ["call_failed"] * 4 + ["call"]


def test_each_in_memory_connection_is_its_own_run(tmp_path: Path) -> None:
    async def body() -> None:
        async with running_proxy(toys_contract(), tmp_path, TOYS_ONLY) as proxy:
            for _ in range(2):
                async with Client(proxy.server, mode="legacy") as client:
                    result = await client.call_tool("site_visits", {"site": "site-a"})
                    assert receipt_ids(result) == ["c01.0"]

    anyio.run(body)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-01", "run-02"]


FAMILY_TASKS = [task.task_id for task in build_tasks(generate_world("00"))]


@pytest.mark.parametrize("task_id", FAMILY_TASKS)
def test_the_benchmark_tools_through_the_proxy_certify_an_honest_run(
    tmp_path: Path, task_id: str
) -> None:
    task, _ = task_by_id(task_id)
    script = Script(task, "honest")

    async def body() -> Any:
        async with (
            running_proxy(benchmark_contract(task), tmp_path, BENCH_ONLY) as proxy,
            Client(proxy.server, mode="auto") as client,
        ):
            seen: list[Seen] = []
            while isinstance(action := script.next(seen), CallAction):
                result = await client.call_tool(action.tool_id, action.args)
                call_id = (result.meta or {})["ect/receipts"]["call_id"]
                seen.append(Seen(call_id, action.tool_id, action.args, result.structured_content))
            submission = script.submission(seen)
            return await client.call_tool(
                "ect_submit",
                {"claims": json.loads(submission.claims), "answer": json.loads(submission.answer)},
            )

    result = anyio.run(body)
    assert not result.is_error, first_text(result)
    assert result.structured_content == {"verdict": "complete", "answer": dict(task.gold)}


def test_an_upstream_over_http_on_loopback_is_gated_like_one_over_stdio(tmp_path: Path) -> None:
    import socket

    import uvicorn
    from mcp_toys import toys_server

    from harness.gate import load_contract
    from harness.mcp_proxy.naming import Upstream
    from harness.mcp_proxy.server import Proxy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn.Config(
        toys_server().streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    upstream = Upstream(name="toys", url=f"http://127.0.0.1:{port}/mcp")

    async def body() -> Any:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            with anyio.fail_after(30):
                while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
                    await anyio.sleep(0.05)
            gate = load_contract(json.dumps(toys_contract()).encode())
            try:
                async with (
                    Proxy(gate, [upstream], tmp_path / "runs") as proxy,
                    Client(proxy.server, mode="legacy") as client,
                ):
                    for site in ("site-a", "site-b", "site-c"):
                        await client.call_tool("site_visits", {"site": site})
                    return await client.call_tool(
                        "ect_submit", {"claims": _claims(CITE), "answer": HONEST}
                    )
            finally:
                server.should_exit = True

    result = anyio.run(body)
    assert not result.is_error, first_text(result)
    assert result.structured_content == {"verdict": "complete", "answer": HONEST}


def test_the_refusal_budget_ends_in_a_stuck_result_that_is_not_an_error(tmp_path: Path) -> None:
    async def body() -> list[Any]:
        async with (
            running_proxy(toys_contract(max_refusals=2), tmp_path, TOYS_ONLY) as proxy,
            Client(proxy.server, mode="legacy") as client,
        ):
            return [
                await client.call_tool("ect_submit", {"claims": "not json", "answer": HONEST}),
                await client.call_tool("ect_submit", {"claims": _claims([]), "answer": HONEST}),
                await client.call_tool("ect_submit", {"claims": _claims(CITE), "answer": HONEST}),
                await client.call_tool("site_visits", {"site": "site-a"}),
            ]

    malformed, stuck, again, after = anyio.run(body)
    assert malformed.is_error
    assert "ADAPTER_CERTIFICATE_MALFORMED" in first_text(malformed)
    assert not stuck.is_error
    assert first_text(stuck).startswith("STOPPED, NOT DONE")
    assert stuck.structured_content == {"verdict": "stuck", "answer": None}
    assert first_text(again) == first_text(stuck)  # the run ended: nothing more is judged
    assert after.is_error
    assert "This run has ended (stuck)" in first_text(after)
    record = _record(tmp_path / "runs" / "run-01")
    assert [s.verdict.value for s in record.submissions] == ["continue", "stuck"]
    assert all(r.agrees for r in reverify(record))


def test_an_invalid_result_from_a_hand_written_upstream_is_an_error_and_no_receipt(
    tmp_path: Path,
) -> None:
    from harness.gate import load_contract
    from harness.mcp_proxy.naming import Upstream
    from harness.mcp_proxy.server import Proxy

    raw = Upstream(name="raw", argv=(sys.executable, str(Path(__file__).with_name("mcp_raw.py"))))
    gate = load_contract(json.dumps(toys_contract()).encode())

    async def body() -> list[Any]:
        with open(tmp_path / "stderr.txt", "w") as errlog:  # noqa: ASYNC230 - opened once
            async with (
                Proxy(gate, [raw], tmp_path / "runs", errlog=errlog, call_timeout=3) as proxy,
                Client(proxy.server, mode="legacy") as client,
            ):
                return [
                    await client.call_tool("bad_shape", {}),
                    await client.call_tool("not_a_result", {}),
                ]

    bad_shape, not_a_result = anyio.run(body)
    assert bad_shape.is_error
    assert "upstream raw sent an invalid result (1 errors)" in first_text(bad_shape)
    # The SDK's client drops a response whose result is not an object, so that call times out.
    assert not_a_result.is_error
    assert "upstream raw did not answer within 3 s" in first_text(not_a_result)
    run = tmp_path / "runs" / "run-01"
    assert _record(run).calls == ()
    assert [e["event"] for e in _events(run)] == ["call_failed", "call_failed"]
