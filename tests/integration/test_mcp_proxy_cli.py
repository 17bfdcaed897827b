"""``harness mcp-proxy`` as a process: stdio and HTTP clients of the SDK, and its bad inputs.

The proxy runs as the command a client configures; its upstreams are real subprocesses. HTTP
listens on 127.0.0.1 only, on a port the test picked.
"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import BENCH_ARGV, ERAS, TOYS_ARGV, first_text, http_client
from mcp_toys import toys_contract

from harness.gate import GateRecord, reverify

CITE = ["c01.0", "c02.0", "c03.0"]
HONEST = {"total_visits": 293, "busiest_site": "site-a"}
CLAIMS = [
    {"slot": "total_visits", "value": 293, "evidence": CITE, "transform": {"op": "sum"}},
    {
        "slot": "busiest_site",
        "value": "site-a",
        "evidence": CITE,
        "transform": {"op": "argmax", "key": "entity"},
    },
]


def _proxy_args(tmp: Path, *extra: str) -> list[str]:
    contract = tmp / "contract.json"
    contract.write_text(json.dumps(toys_contract()))
    return [
        "-m",
        "harness",
        "mcp-proxy",
        "--upstream",
        f"bench={shlex.join(BENCH_ARGV)}",
        "--upstream",
        f"toys={shlex.join(TOYS_ARGV)}",
        "--contract",
        str(contract),
        "--run-dir",
        str(tmp / "runs"),
        *extra,
    ]


async def _honest_run(client: Client) -> Any:
    for site in ("site-a", "site-b", "site-c"):
        result = await client.call_tool("site_visits", {"site": site})
        assert not result.is_error
    return await client.call_tool("ect_submit", {"claims": CLAIMS, "answer": HONEST})


def _record(directory: Path) -> GateRecord:
    return msgspec.json.decode((directory / "record.json").read_bytes(), type=GateRecord)


@pytest.mark.parametrize("mode", ERAS)
def test_a_stdio_client_runs_one_gated_run_per_process(tmp_path: Path, mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=_proxy_args(tmp_path))

    async def body() -> Any:
        with open(tmp_path / "proxy-stderr.txt", "w") as errlog:  # noqa: ASYNC230
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                return await _honest_run(client)

    result = anyio.run(body)
    assert not result.is_error
    assert result.structured_content == {"verdict": "complete", "answer": HONEST}
    runs = sorted((tmp_path / "runs").iterdir())
    assert [p.name for p in runs] == ["run-01"]
    record = _record(runs[0])
    assert [s.verdict.value for s in record.submissions] == ["complete"]
    assert all(r.agrees for r in reverify(record))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_clients_are_one_run_per_episode_header_and_refused_without(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with open(tmp_path / "proxy-stderr.txt", "w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, *_proxy_args(tmp_path, "--http", f"127.0.0.1:{port}")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
        try:
            anyio.run(_http_session, url, port)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    assert code == 0  # stopped cleanly: every run's files closed
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == ["ep-auto", "ep-legacy"]
    for name in runs:
        record = _record(tmp_path / "runs" / name)
        assert [s.verdict.value for s in record.submissions] == ["complete"]
        assert [c.call_id for c in record.calls] == ["c01", "c02", "c03"]


async def _http_session(url: str, port: int) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                probe = await anyio.connect_tcp("127.0.0.1", port)
                await probe.aclose()
                break
            except OSError:
                await anyio.sleep(0.1)
    async with httpx2.AsyncClient() as raw:
        refused = await raw.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert refused.status_code == 400
    assert "ect-episode" in refused.json()["error"]["message"]
    for mode in ERAS:
        async with http_client(url, f"ep-{mode}", mode) as client:
            result = await _honest_run(client)
            assert not result.is_error, first_text(result)
    # The same episode on a new connection continues the same ledger.
    async with http_client(url, "ep-legacy", "legacy") as client:
        again = await client.call_tool("ect_submit", {"claims": CLAIMS, "answer": HONEST})
        assert again.structured_content == {"verdict": "complete", "answer": HONEST}
        after = await client.call_tool("site_visits", {"site": "site-a"})
        assert after.is_error
        assert "This run has ended (complete)" in first_text(after)


def test_a_contract_that_does_not_parse_is_one_line_before_any_upstream(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    contract = tmp_path / "contract.json"
    contract.write_text('{"schema_version": 1, "descriptor": {}}')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "mcp-proxy",
            "--upstream",
            f"x=touch {marker}",
            "--contract",
            str(contract),
            "--run-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("error: not a gate contract:")
    assert not marker.exists()
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        ("x=/nonexistent/tool-server", "error: upstream x could not be started or listed:"),
        pytest.param(  # never answers: the SDK takes ~15 s to give up on the child
            "x=sleep 60",
            "error: upstream x could not be started or listed: Request 'initialize' timed out",
            marks=pytest.mark.slow,
        ),
        ("cmd", "error: --upstream 'cmd': expected NAME=COMMAND or NAME=URL"),
        ("1x=cmd", "error: --upstream '1x=cmd': NAME must be a letter"),
    ],
)
def test_a_bad_upstream_is_one_line(tmp_path: Path, upstream: str, message: str) -> None:
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(toys_contract()))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "mcp-proxy",
            "--upstream",
            upstream,
            "--contract",
            str(contract),
            "--run-dir",
            str(tmp_path / "runs"),
            "--call-timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(message), done.stderr


_BLOCKED = (
    "import sys\n"
    "class Blocker:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('mcp', 'mcp_types'):\n"
    "            raise ModuleNotFoundError(name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, Blocker())\n"
    "from harness.cli import main\n"
    "main()\n"
)


def test_without_the_mcp_extra_the_command_names_it(tmp_path: Path) -> None:
    # The SDK is made missing with an import blocker (it is installed in the test venv).
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(toys_contract()))
    args = ["--upstream", "x=true", "--contract", str(contract), "--run-dir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED, "mcp-proxy", *args],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: harness mcp-proxy needs the [mcp] extra: pip install 'ect-harness[mcp]'"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contract.json"]


def test_sigterm_ends_a_stdio_proxy_with_its_run_files_complete(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, *_proxy_args(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    client = {"name": "raw", "version": "1"}
    messages: list[dict[str, Any]] = [
        {"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
         "capabilities": {}, "clientInfo": client}},
        {"method": "notifications/initialized"},
        {"id": 2, "method": "tools/call",
         "params": {"name": "site_visits", "arguments": {"site": "site-a"}}},
    ]  # fmt: skip
    for message in messages:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    proc.stdin.flush()
    while json.loads(proc.stdout.readline()).get("id") != 2:
        pass
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    proc.stdin.close()
    proc.stdout.close()
    record = _record(tmp_path / "runs" / "run-01")  # written when the run ended
    assert [c.call_id for c in record.calls] == ["c01"]
