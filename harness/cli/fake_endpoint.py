"""``harness fake-endpoint gemini|openai``: a loopback endpoint to rehearse a paid run with.

Serves one wire shape on 127.0.0.1 (``harness.providers.loopback``) answering as the simulated
provider would (``harness.providers.loopback_sim``), so the real client of that provider runs the
whole study offline; with ``--deny-key`` it answers as a revoked key, with ``--status-every N
CODE`` every N-th model request gets HTTP CODE (429: a quota error), with ``--fail-rate P`` that
share of requests (drawn from ``--seed`` and the request bytes: the same seed, the same faults)
gets a transport fault. The first stdout line is the port; the server runs until SIGINT or
SIGTERM, then prints what it counted.
"""

from __future__ import annotations

import signal
import threading

import click

from harness.errors import InputError
from harness.providers.loopback import FakeEndpoint, Shape
from harness.providers.loopback_sim import SimulatedResponder
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config
from harness.terminal import echo

__all__ = ["fake_endpoint_cmd"]


@click.command("fake-endpoint")
@click.argument("shape", type=click.Choice(["gemini", "openai"]))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0: a free one; the first stdout line names it).",
)
@click.option(
    "--latency-ms",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Delay of every reply.",
)
@click.option(
    "--jitter",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Latency jitter, a share of it (drawn from --seed and the request).",
)
@click.option(
    "--fail-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Share of requests that get a transport fault (drawn from --seed and the "
    "request bytes: a retry of the same bytes fails again).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the jitter and fault draws: the same seed, the same faults.",
)
@click.option(
    "--status-every",
    type=(click.IntRange(min=1), click.IntRange(100, 599)),
    default=None,
    metavar="N CODE",
    help="Answer every N-th model request with HTTP CODE (e.g. 50 429: 2 % quota "
    "errors), in the provider's own error format.",
)
@click.option(
    "--deny-key",
    is_flag=True,
    help="Answer every request as a revoked key would (Gemini 403, OpenAI 401).",
)
def fake_endpoint_cmd(
    shape: Shape,
    port: int,
    latency_ms: float,
    jitter: float,
    fail_rate: float,
    seed: int,
    status_every: tuple[int, int] | None,
    deny_key: bool,
) -> None:
    """Serve a loopback Gemini or OpenAI-compatible endpoint that answers like the simulated
    provider, to rehearse a run (a dead key, a quota error) with no network and no cost.

    \b
    harness fake-endpoint gemini --latency-ms 200 --status-every 50 429 &
    harness v2 run --provider gemini --provider-base-url http://127.0.0.1:PORT \\
        --credential-env ANY_VAR --max-cells 8
    """
    config, _ = load_config(data_path(DEFAULT_CONFIG_PATH))
    responder = SimulatedResponder(
        config.generation_config,
        shape=shape,
        latency_ms=latency_ms,
        jitter=jitter,
        fail_rate=fail_rate,
        seed=seed,
    )
    try:
        server = FakeEndpoint(
            shape,
            port=port,
            responder=responder,
            record=False,
            deny_key=deny_key,
            status_every=status_every,
        )
    except OSError as e:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from e
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    with server:
        echo(str(server.port))
        echo(
            f"{shape} endpoint at {server.base_url} (latency {latency_ms:g} ms, fail rate "
            f"{fail_rate:g} with seed {seed}"
            + (f", HTTP {status_every[1]} every {status_every[0]} requests" if status_every else "")
            + (", every key denied" if deny_key else "")
            + "); Ctrl-C stops it",
            err=True,
        )
        done.wait()
    served = server.served
    statuses = ", ".join(f"{code}: {n}" for code, n in sorted(served.by_status.items()))
    echo(
        f"received {served.requests} requests ({served.model_requests} model requests, "
        f"{responder.faults} transport faults); delivered {served.delivered} replies with "
        f"{served.prompt_tokens} prompt, {served.output_tokens} output and "
        f"{served.thought_tokens} thought tokens; replies by status: {statuses or 'none'}"
    )
