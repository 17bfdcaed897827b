"""The full-trace LLM critic: the whole trace in the prompt, one model call per decision.

Every decision goes to the provider with the ``full_trace_critic.v1`` prompt: the task brief,
the agent's answer, a trace summary and every tool call with its arguments, transport status
and full response. The sampling seed is fixed by the study (``FULL_TRACE_CRITIC_SEED`` = 2705)
and the temperature by the frozen generation config. There are no fast paths. A provider
failure or an unparseable verdict maps to ``continue`` (and stays in the denominator).

With the simulated provider the verdicts come from a deterministic permissive reviewer, not a
language model; reports label that row as simulated.
"""

from __future__ import annotations

from harness.policies._model_call import ask_critic, cell_id_for, critic_view_of
from harness.policies.decision import PolicyDecision
from harness.policies.view import SnapshotView
from harness.providers.attempts import Audit
from harness.providers.config import GenerationConfig
from harness.providers.critic import critic_request
from harness.providers.protocol import Provider

__all__ = ["FullTraceCritic"]


class FullTraceCritic:
    """The full-trace critic (see the module docstring).

    Args:
        provider: who answers.
        audit: where attempts are journaled.
        config: the frozen generation config.
        cell_id: the cell the decisions belong to; None derives one from each view's digest.
    """

    def __init__(
        self,
        provider: Provider,
        audit: Audit,
        config: GenerationConfig,
        *,
        cell_id: str | None = None,
    ) -> None:
        self._provider = provider
        self._audit = audit
        self._config = config
        self._cell_id = cell_id

    @property
    def name(self) -> str:
        """``full_trace_critic``."""
        return "full_trace_critic"

    async def decide(self, view: SnapshotView) -> PolicyDecision:
        """Ask the model; a failed or unreadable call is ``continue``."""
        request = critic_request(
            critic_view_of(view, full_trace=True),
            cell_id=self._cell_id or cell_id_for(view),
            seed=None,  # the study fixes the full-trace critic's seed (2705)
            config=self._config,
        )
        return await ask_critic(self._provider, self._audit, request)
