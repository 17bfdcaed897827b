"""The termination-critic core: permissive deterministic fast paths first, the model after.

The core decides in this order:

1. **Repeated identical calls** (fast path): when the trace ends with the same request
   (tool and arguments) issued ``STUCK_REPEATS`` or more times in a row, the agent is declared
   ``stuck``. The core has no notion of an available recovery.
2. **Completion signal** (fast path): when the agent offers a final response (an answer
   object, possibly empty) and its message carries DONE, the core accepts ``complete``
   without looking at the answer or the evidence. This is the permissive path the study
   measures.
3. **Model path**: anything else goes to the provider with the ``critic.v1`` prompt (task,
   answer, trace summary) at the cell's seed; a provider or parse failure is ``continue``.

Fast-path decisions carry ``DecisionSource.FAST_PATH`` and a ``CRITIC_FAST_*`` reason: they are
deterministic critic decisions, never reported as LLM judgements. This arm does not include the
enclosing controller's one-attempt stuck recovery (see ``controller``).
"""

from __future__ import annotations

from typing import Final

from harness.ect.model import Verdict
from harness.policies._model_call import ask_critic, cell_id_for, critic_view_of
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.signals import carries_completion_token, has_final_response, trailing_repeats
from harness.policies.view import SnapshotView
from harness.providers.attempts import Audit
from harness.providers.config import GenerationConfig
from harness.providers.critic import critic_request
from harness.providers.protocol import Provider

__all__ = ["STUCK_REPEATS", "CriticCore", "fast_path"]

STUCK_REPEATS: Final = 2
"""A trace ending with this many identical requests in a row is declared stuck."""


def fast_path(view: SnapshotView) -> PolicyDecision | None:
    """The critic core's deterministic decision on ``view``, or None when the model must judge."""
    repeats = trailing_repeats(view.trace)
    if repeats >= STUCK_REPEATS:
        call = view.trace[-1]
        return PolicyDecision(
            decision=Verdict.STUCK,
            reason_codes=(PolicyReason.CRITIC_FAST_REPEATED_CALLS.value,),
            source=DecisionSource.FAST_PATH,
            feedback=f"{call.tool_id} was called {repeats} times in a row with the same "
            "arguments; no further progress is expected.",
        )
    if has_final_response(view) and carries_completion_token(view.message):
        return PolicyDecision(
            decision=Verdict.COMPLETE,
            reason_codes=(PolicyReason.CRITIC_FAST_COMPLETION_SIGNAL.value,),
            source=DecisionSource.FAST_PATH,
        )
    return None


class CriticCore:
    """The critic core (see the module docstring).

    Args:
        provider: who answers the model path.
        audit: where model attempts are journaled.
        config: the frozen generation config.
        seed: the cell's sampling seed for the model path.
        cell_id: the cell the decisions belong to; None derives one from each view's digest.
    """

    def __init__(
        self,
        provider: Provider,
        audit: Audit,
        config: GenerationConfig,
        *,
        seed: int,
        cell_id: str | None = None,
    ) -> None:
        self._provider = provider
        self._audit = audit
        self._config = config
        self._seed = seed
        self._cell_id = cell_id

    @property
    def name(self) -> str:
        """``critic_core``."""
        return "critic_core"

    async def decide(self, view: SnapshotView) -> PolicyDecision:
        """Fast paths first; only an undecided view reaches the provider."""
        decided = fast_path(view)
        if decided is not None:
            return decided
        request = critic_request(
            critic_view_of(view, full_trace=False),
            cell_id=self._cell_id or cell_id_for(view),
            seed=self._seed,
            config=self._config,
        )
        return await ask_critic(self._provider, self._audit, request)
