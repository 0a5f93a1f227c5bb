"""Route before rank: which source (API, MCP server) a request is about.

With several large sources in one agent, one API's words crowd out another's: "remind me to
review the budget" finds GitHub's budgets before Slack's reminders. Each source gets a smoothed
unigram model of its tools' words (Dirichlet prior, the whole catalog as background); a
request's terms score each source by how much likelier they are under it than under the
catalog, and the softmax of those scores is the source's share. The rankers add a boost from
that share to every tool of the source (`boosts`): nothing changes with a single source, or
for tools that name no source.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

_MU = 2000.0
"""Dirichlet smoothing mass: how many catalog words a source's model borrows."""
_FLOOR = -4.0
"""Lowest log share a tool is boosted by (a source the request plainly is not about)."""


class SourceRouter:
    """Built once per tool set from each tool's source and token fields."""

    def __init__(self, sources: Sequence[str], fields: Sequence[Sequence[Sequence[str]]]) -> None:
        names = sorted({s for s in sources if s})
        self.active = len(names) > 1
        self._member = np.full(len(sources), -1, dtype=np.intp)
        self._ratios: dict[str, Vector] = {}
        if not self.active:
            return
        index = {name: i for i, name in enumerate(names)}
        counts = [Counter[str]() for _ in names]
        for i, (source, doc) in enumerate(zip(sources, fields, strict=True)):
            if source:
                self._member[i] = index[source]
                for field in doc:
                    counts[index[source]].update(field)
        total = Counter[str]()
        for c in counts:
            total.update(c)
        grand = float(sum(total.values())) or 1.0
        sizes = np.asarray([float(sum(c.values())) for c in counts])
        for term, n in total.items():
            background = n / grand
            own = np.asarray([c.get(term, 0) for c in counts], dtype=np.float64)
            model = (own + _MU * background) / (sizes + _MU)
            self._ratios[term] = np.log(model / background)

    def shares(self, weights: Mapping[str, float]) -> Vector | None:
        """Each source's share of the request (softmax), or None with nothing to route."""
        if not self.active:
            return None
        total: Vector | None = None
        for term, weight in weights.items():
            ratio = self._ratios.get(term)
            if ratio is not None:
                total = weight * ratio if total is None else total + weight * ratio
        if total is None:
            return None
        exp = np.exp(total - total.max())
        out: Vector = exp / exp.sum()
        return out

    def boosts(self, weights: Mapping[str, float]) -> Vector | None:
        """Per tool: log of its source's share relative to the best source (0 for the best
        source and for tools without a source, down to -4)."""
        shares = self.shares(weights)
        if shares is None:
            return None
        logs = np.maximum(np.log(np.maximum(shares / shares.max(), 1e-12)), _FLOOR)
        out: Vector = np.where(self._member >= 0, logs[self._member], 0.0)
        return out
