"""Progress tracker: stop a step that keeps failing, or fails the same way twice.

A *step* is one tool target (`connector:jira/create_issue`, `mcp:github/search`, a tool
name), so retrying a different action of the same connector is a different step.

Decisions, per failed call of a step (attempts counts failures since the last success):
1. Stuck check first: if the step failed before and the new error is at least
   `similarity_threshold` similar to the previous one, Stop at once.
2. Otherwise, Stop when attempts >= `max_reattempts_per_step`.
3. Otherwise Continue.
The stuck check wins when both hold because its reason says *why* retrying is pointless
(the same error repeats) while the count alone does not.

Reason formats: the similarity is a percentage with one decimal (`92.3%`, `100.0%`); the
threshold is a percentage without a trailing `.0` (`85%`, but `85.5%`).

See docs/contract.md §6.2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.agents.config import StepIteration
from app.events import StepLimitReached
from app.reasoning.similarity import similarity


@dataclass(frozen=True, kw_only=True)
class Continue:
    step_id: str
    attempts: int


@dataclass(frozen=True, kw_only=True)
class Stop:
    step_id: str
    attempts: int
    reason: str
    similarity: float | None = None
    """Set when the stop came from the stuck check."""

    def event(self, action: str) -> StepLimitReached:
        """The `step_limit_reached` event; `action` is the agent's `on_limit_reached`."""
        return StepLimitReached(
            step_id=self.step_id, attempts=self.attempts, reason=self.reason, action=action
        )


StepDecision = Continue | Stop


def format_similarity(value: float) -> str:
    """A 0..1 similarity as a percentage with one decimal: 0.9234 → `92.3`."""
    return f"{value * 100:.1f}"


def format_threshold(value: float) -> str:
    """A 0..1 threshold as a percentage without a trailing `.0`: 0.85 → `85`, 0.855 → `85.5`."""
    text = f"{value * 100:.1f}"
    return text[:-2] if text.endswith(".0") else text


def max_reattempts_reason(step_id: str, maximum: int) -> str:
    return f"Step {step_id!r} reached max reattempts ({maximum})"


def stuck_reason(step_id: str, score: float, threshold: float) -> str:
    return (
        f"Step {step_id!r} appears stuck: consecutive errors are "
        f"{format_similarity(score)}% similar (threshold: {format_threshold(threshold)}%)"
    )


@dataclass
class _StepState:
    attempts: int = 0
    last_error: str | None = None


@dataclass
class ProgressTracker:
    """Per-run failure bookkeeping; one instance per run."""

    config: StepIteration = field(default_factory=StepIteration)
    _steps: dict[str, _StepState] = field(default_factory=dict, init=False, repr=False)

    def record_failure(self, step_id: str, error: str) -> StepDecision:
        state = self._steps.setdefault(step_id, _StepState())
        previous = state.last_error
        state.attempts += 1
        state.last_error = error
        if previous is not None:
            score = similarity(previous, error)
            if score >= self.config.similarity_threshold:
                reason = stuck_reason(step_id, score, self.config.similarity_threshold)
                return Stop(
                    step_id=step_id, attempts=state.attempts, reason=reason, similarity=score
                )
        if state.attempts >= self.config.max_reattempts_per_step:
            reason = max_reattempts_reason(step_id, self.config.max_reattempts_per_step)
            return Stop(step_id=step_id, attempts=state.attempts, reason=reason)
        return Continue(step_id=step_id, attempts=state.attempts)

    def record_success(self, step_id: str) -> None:
        """A success resets the step: its attempts and its last error are forgotten."""
        self._steps.pop(step_id, None)

    def attempts(self, step_id: str) -> int:
        state = self._steps.get(step_id)
        return state.attempts if state else 0


_META_RESOURCE_ARG = {"connector": "connector", "mcp": "server", "database": "database"}
_META_RUN = {"connector": ("execute", "action"), "mcp": ("call", "tool")}
"""Meta-tool → (subcommand that runs something, argument naming what it runs)."""


def _text(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) and value else None


def step_id_for(
    tool_name: str, arguments: Mapping[str, Any], kind: str, *, target: str = ""
) -> str:
    """The step (tool target) a call belongs to.

    - meta `connector` execute → `connector:<connector>/<action>`; other subcommands →
      `connector:<connector>`.
    - meta `mcp` call → `mcp:<server>/<tool>`; other subcommands → `mcp:<server>`.
    - meta `database` → `database:<database>/<subcommand>` (e.g. `database:sales/query`).
    - `read_skill(name)` → `skill:<name>`.
    - anything else → `target` when given (a legacy tool's `ToolDef.target`, e.g.
      `connector:jira/create_issue` for `jira__create_issue`), else the tool name; a meta
      call missing its resource argument falls back the same way.
    """
    if tool_name in _META_RESOURCE_ARG and kind in ("meta", tool_name):
        step = _meta_step(tool_name, arguments)
        if step is not None:
            return step
    elif tool_name == "read_skill":
        skill = _text(arguments, "name")
        if skill is not None:
            return f"skill:{skill}"
    return target or tool_name


def _meta_step(tool_name: str, arguments: Mapping[str, Any]) -> str | None:
    resource = _text(arguments, _META_RESOURCE_ARG[tool_name])
    subcommand = _text(arguments, "subcommand")
    if resource is None:
        return None
    if tool_name == "database":
        return f"database:{resource}/{subcommand}" if subcommand else f"database:{resource}"
    run, what_key = _META_RUN[tool_name]
    what = _text(arguments, what_key)
    if subcommand == run and what is not None:
        return f"{tool_name}:{resource}/{what}"
    return f"{tool_name}:{resource}"
