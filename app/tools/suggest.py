"""Near-miss suggestions for unknown names ("did you mean …"), shared by every tool source."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rapidfuzz import fuzz, process, utils

_CUTOFF = 70.0
_LISTED = 20


def _normalise(name: str) -> str:
    return utils.default_process(name.replace("_", " ").replace("-", " ").replace(".", " "))


def did_you_mean(value: str, choices: Iterable[str], *, limit: int = 1) -> list[str]:
    """The closest known names to `value` (best first); empty when nothing is close."""
    options = list(choices)
    if not value or not options:
        return []
    folded = {c.lower(): c for c in options}
    if value.lower() in folded:
        return [folded[value.lower()]]
    matches = process.extract(
        value,
        options,
        scorer=fuzz.WRatio,
        processor=_normalise,
        score_cutoff=_CUTOFF,
        limit=limit,
    )
    return [match[0] for match in matches]


def format_choices(choices: Sequence[str], *, listed: int = _LISTED) -> str:
    """`a, b, c` — at most `listed` names, then `… and N more`."""
    shown = ", ".join(choices[:listed])
    rest = len(choices) - listed
    return f"{shown} … and {rest} more" if rest > 0 else shown


def unknown_name(
    kind: str,
    value: str,
    choices: Sequence[str],
    *,
    scope: str = "",
    suggest_from: Sequence[str] | None = None,
) -> str:
    """`Unknown <kind> 'x' in <scope>. Valid: a, b. Did you mean 'y'?` — what the model reads.

    `suggest_from` widens the near-miss search beyond the listed `choices`.
    """
    where = f" in {scope}" if scope else ""
    if not choices:
        return f"Unknown {kind} {value!r}{where}: none are available."
    message = f"Unknown {kind} {value!r}{where}. Valid: {format_choices(choices)}."
    close = did_you_mean(value, choices if suggest_from is None else suggest_from)
    if close:
        message += f" Did you mean {close[0]!r}?"
    return message
