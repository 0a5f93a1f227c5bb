"""Hybrid tool ranker (strategy `hybrid`): lexical scores fused with two static embedding models.

Both models are static (a text's vector is the mean of its tokens' vectors, no transformer at run
time) and load from files on disk only, never from the network:
- WordLlama's 256-dimension model, whose weights ship inside the `wordllama` wheel;
- a 256-dimension token table distilled offline from all-MiniLM-L6-v2, shipped in this repository
  (app/pipeline/static_model.py, app/pipeline/models/README.md for its licence).
Per request, the lexical (BM25F) scores and each model's cosine similarities are z-normalised
across the tools and added with the weights in `FUSION`. A request of several clauses ("find X,
then do Y") is also scored clause by clause: the final score is 0.65 x the whole request's score
plus 0.35 x the best clause's, so a tool that fits one part well is not drowned by the rest; on
catalogs of API operations each clause's own best tools are also brought near the top (`_merge`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from app.kit.lru import Lru
from app.pipeline.operations import OperationShapes, ShapeWeights
from app.pipeline.ranker import (
    CachedRanker,
    LexicalRanker,
    ScoredTool,
)
from app.pipeline.static_model import Ids, StaticModel
from app.pipeline.tool_fields import tool_text
from app.retrieval.embedding import Embedder as _Embedder
from app.retrieval.fusion import znorm_rows as _znorm_rows
from app.retrieval.text import words
from app.tools.base import ToolDef

Matrix = npt.NDArray[np.float32]
Vector = npt.NDArray[np.float64]


SHAPE = ShapeWeights(verb=1.5, resource=1.5, prior=0.5, admin=1.0, name=0.5, own=1.0)
"""Chosen on the development half of the real-catalog set (bench/selection.py --real): a
plateau from verb 1.0-2.0, object 1.0-2.0, prior 0.35-0.5 (in z-score units of the fused
signals); admin 0 / 0.5 / 1.0 gave recall@5 0.64 / 0.65 / 0.66; name coverage 0 / 0.5 / 1.0
gave 0.67 / 0.69 / 0.70 with all parts@10 0.77 / 0.77 / 0.76; own (fourth round) 0 / 0.5 /
1.0 / 1.5 gave recall@5 0.761 / 0.761 / 0.767 / 0.767."""


@dataclass(frozen=True, slots=True)
class Fusion:
    """Weights of the z-normalised signals, and of the whole request against its best clause."""

    lexical: float
    wordllama: float
    minilm: float
    """The static model distilled from MiniLM (app/pipeline/static_model.py)."""
    whole: float = 0.65
    clause: float = 0.35
    route: float = 0.3
    """Per nat of a source's log share of the request (pipeline/routing.py)."""
    agreement: float = 0.3
    """Extra lexical weight for a request whose best lexical match stands out (catalogs of
    API operations only)."""
    merge: int = 6
    """Places near the top the clauses' own best tools take, shared between the clauses (at
    most `_CLAUSE_BEST` each; `_merge`; 0: never; catalogs of API operations only: on BFCL's
    long single-intent requests it costs recall)."""
    shape: ShapeWeights = SHAPE
    """The operation's shape against the request's verb and object (pipeline/operations.py;
    catalogs of API operations only)."""


FUSION = Fusion(lexical=0.15, wordllama=0.3, minilm=0.5, whole=0.8, clause=0.2)
"""Chosen within the `tune` half of the selection benchmark (bench/selection.py): a grid over
the weights (0.15-0.45 lexical, 0.15-0.6 WordLlama, 0.5-1.2 MiniLM, whole 0.65/0.8), scored on
the tune half's odd positions with a MiniLM table refined on its even positions only
(scripts/distil_static.py); the `test` half is reported."""
_MAX_CLAUSES = 6
_MIN_CLAUSE_WORDS = 2
_JOINERS = "and then|and|then|also|as well as|plus|after that|afterwards|&"
_CLAUSE_SPLIT = re.compile(
    rf"[.;,!?]+\s+|[.;!?]+$|\s+(?:{_JOINERS})\s+|\s*/\s*",
    re.IGNORECASE,
)
_LEADING_JOINER = re.compile(rf"^(?:{_JOINERS})\s+", re.IGNORECASE)


def clause_spans(query: str, clauses: Sequence[str]) -> list[tuple[int, int]] | None:
    """Where each clause sits in the request (None if one cannot be found verbatim)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for clause in clauses:
        at = query.find(clause, pos)
        if at < 0:
            return None
        spans.append((at, at + len(clause)))
        pos = at + len(clause)
    return spans


def split_clauses(query: str) -> list[str]:
    """The request's clauses (`. ; , and / then`), only those of at least two words."""
    parts = [_LEADING_JOINER.sub("", p.strip()) for p in _CLAUSE_SPLIT.split(query) if p.strip()]
    clauses = [p for p in parts if len(words(p)) >= _MIN_CLAUSE_WORDS]
    return clauses[:_MAX_CLAUSES] if len(clauses) > 1 else []


_TEXT_CACHE = 1 << 15
_WORDLLAMA: Lru[str, Matrix] = Lru(_TEXT_CACHE)
_STATIC_IDS: Lru[str, Ids] = Lru(_TEXT_CACHE)


def _wordllama_rows(texts: Sequence[str]) -> Matrix:
    """WordLlama vectors of tool texts, each text embedded once per process: a ranker built
    for a catalog that grew by one connector embeds only the new connector's tools."""
    missing = list(dict.fromkeys(t for t in texts if _WORDLLAMA.get(t) is None))
    if missing:
        for text, row in zip(missing, _Embedder.embed(missing), strict=True):
            _WORDLLAMA.put(text, row)
    dim = _Embedder.model().embedding.shape[1]
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        row = _WORDLLAMA.get(text)
        out[i] = row if row is not None else _Embedder.embed([text])[0]
    return out


def _static_ids(model: StaticModel, texts: Sequence[str]) -> list[Ids]:
    """Token ids of tool texts for the distilled model, each text encoded once per process."""
    return [_STATIC_IDS.get_or_build(t, partial(model.ids, t)) for t in texts]


def _top(scores: Vector | Matrix, limit: int) -> list[int]:
    """Indexes of the `limit` best scores, best first (ties keep input order)."""
    n = len(scores)
    if limit < n:
        part = np.argpartition(-scores, limit - 1)[:limit]
        return [int(i) for i in part[np.lexsort((part, -scores[part]))]]
    return [int(i) for i in np.lexsort((np.arange(n), -scores))]


def _merge(order: list[int], clauses: Matrix, slots: int, limit: int) -> list[int]:
    """Split and merge: after the whole request's best `_WHOLE_FIRST` tools, each clause's own
    best ones, taken in turn (each clause's first, then each one's second...), then the rest of
    the whole request's order: every part of a request of several has tools near the top, even
    when the whole request's scores are dominated by one part ("check our Stripe balance and
    post it in #finance": Stripe's words outweigh Slack's). `slots` are shared between the
    clauses, at least one and at most `_CLAUSE_BEST` each.

    Measured on the development half of the real-catalog set: recall@5 0.736 -> 0.750, all
    parts@10 0.790 -> 0.795 against adding a clause's best only when it stood out (z >= 3);
    2 whole-request tools first and 6 places were best of 1-3 and 4-8."""
    out: dict[int, None] = dict.fromkeys(order[:_WHOLE_FIRST])
    per = max(1, min(_CLAUSE_BEST, slots // len(clauses)))
    tops = [_top(row, per) for row in clauses]
    for i in range(per):
        for top in tops:
            out.setdefault(top[i])
    out.update(dict.fromkeys(order))
    return list(out)[:limit]


HYBRID_MIN_SCORE = 0.34
"""Relevance below which the hybrid ranker keeps nothing, for catalogs of API operations:
relevance is the mean of the lexical one (`LexicalRanker.rank`) and the request's cosine
similarity to the tool in the embedding space; chosen on the development half of the
real-catalog set (bench/selection.py --real)."""
FREE_TEXT_MIN_SCORE = 0.25
"""The same for catalogs of free-text tools (no method and path): their short descriptions
score lower, and a higher floor drops right tools (MetaTool: 17% of the right tools in the top
six score under 0.34, 1.4% under 0.25, on the tune half)."""
HYBRID_SURE_SCORE = 0.42
"""On catalogs of API operations, a best kept tool under this keeps at most two
(`CachedRanker.kept`): on the development half of the real-catalog set no right tool was
dropped, and no request no tool serves kept more than two."""
FOREIGN_SHARE = 0.5
"""A request whose words are at least this share foreign to a catalog of API operations
(`LexicalRanker.foreign_share`: words outside its operations' names, routes, summaries,
parameter names and tags) keeps at most two tools whatever its best score. On the development
half of the real-catalog set: with every word of the descriptions counted as the catalog's,
0.6 (the first rule) called 8 of the 16 unrelated requests unsure (and 1 of 176 served ones);
with the operations' own words at 0.5, 13 (and 12 served ones, none of which lost a right tool
from its selection; 0.4 cost two right tools)."""
HYBRID_WEAK_SCORE = 0.15
"""A best tool between this and `HYBRID_MIN_SCORE` is kept alone (`CachedRanker.kept`)."""
_STANDOUT = 4.0
_WHOLE_FIRST = 2
"""The whole request's best tools that stay first when clauses are merged (`_merge`)."""
_CLAUSE_BEST = 3
"""The most of a clause's own best tools `_merge` brings near the top."""


class HybridRanker(CachedRanker):
    """Rank a fixed set of tools against free-text requests: lexical and embedding scores fused."""

    fusion: ClassVar[Fusion] = FUSION
    min_score: float = HYBRID_MIN_SCORE
    weak_score: float = HYBRID_WEAK_SCORE

    def __init__(self, tools: Sequence[ToolDef]) -> None:
        super().__init__(tools)
        self.lexical = LexicalRanker(tools)
        self._operations = self.lexical.operations
        self.min_score = HYBRID_MIN_SCORE if self._operations else FREE_TEXT_MIN_SCORE
        self.sure_score = HYBRID_SURE_SCORE if self._operations else 0.0
        self._shapes = OperationShapes(tools, self.fusion.shape) if self._operations else None
        texts = [tool_text(t) for t in tools]
        self._matrix = _wordllama_rows(texts) if self.fusion.wordllama else None
        self._static = StaticModel.shared() if self.fusion.minilm else None
        if self._static is not None:
            ids = _static_ids(self._static, texts)
            self._idf = self._static.idf_weights(ids)
            self._minilm: Matrix = self._static.embed_ids(ids, self._idf)

    def unsure(self, query: str) -> bool:
        """On catalogs of API operations: most of the request's words (`FOREIGN_SHARE`) are
        words the catalog never uses, so whatever ranks first matched on what little is left."""
        return self._operations and self.lexical.foreign_share(query) >= FOREIGN_SHARE

    def scores_and_lexical(self, query: str) -> tuple[Vector, Vector]:
        """(fused score per tool, lexical score per tool), in input order."""
        fused, lexical, _, _ = self._signals(query)
        return fused, lexical

    def _signals(self, query: str) -> tuple[Vector, Vector, Matrix | None, Vector | None]:
        """(fused score per tool, lexical score per tool, fused score per clause and tool,
        the request's cosine similarity per tool).

        Row 0 of each signal is the whole request, the others its clauses (one row per text,
        so every reduction runs along contiguous memory); each row is z-normalised, then the
        signals are weighted and added (float32: memory bandwidth, not arithmetic, sets the
        cost).
        """
        lexical = self.lexical.score_array(query)
        if not self._names or not query.strip():
            return lexical, lexical, None, None
        w = self.fusion
        cosine: Vector | None = None
        clauses = split_clauses(query)
        texts = [query, *clauses]
        # Names the request spells out already count in the whole request's score.
        columns = [lexical, *(self.lexical.score_array(c, names=False) for c in clauses)]
        lexical_z = _znorm_rows(np.stack(columns).astype(np.float32))
        # A lexical match that stands far out of the crowd (a z-score above `_STANDOUT`) earns
        # its row more lexical weight, so the embeddings cannot bury it; only for catalogs of
        # API operations, whose method and path make lexical evidence precise (on catalogs of
        # free-text tools such as MetaTool's it costs recall).
        weight = w.lexical
        if self._operations:
            top = lexical_z.max(axis=1, keepdims=True)
            weight = w.lexical + w.agreement * np.clip((top - _STANDOUT) / 4.0, 0.0, 1.0)
        fused: Matrix = weight * lexical_z
        if self._matrix is not None:
            # WordLlama encodes each clause on its own (sliced from the request, a clause's first
            # word would get a different, mid-sentence token).
            sims = _Embedder.embed_few(texts) @ self._matrix.T
            cosine = sims[0].astype(np.float64)
            fused += w.wordllama * _znorm_rows(sims)
        if self._static is not None:
            # WordPiece splits at spaces and punctuation, so a clause's tokens are exactly the
            # request's tokens inside its span: one encode serves the request and its clauses.
            static = self._static
            spans = clause_spans(query, clauses)
            ids = (
                [static.ids(t) for t in texts] if spans is None else static.ids_spans(query, spans)
            )
            sims = static.embed_ids(ids, self._idf) @ self._minilm.T
            cosine = sims[0].astype(np.float64)
            fused += w.minilm * _znorm_rows(sims)
        if self._shapes is not None:
            mined = self.lexical.mined
            for row, text in enumerate(texts):
                terms = self.lexical.query_terms(text)
                fused[row] += self._shapes.signal(text, mined, terms)
        if self.lexical.router.active:
            # Each text routes on its own: one part of a request may be about another API.
            for row, text in enumerate(texts):
                boosts = self.lexical.route_boosts(text)
                if boosts is not None:
                    fused[row] += (w.route * boosts).astype(np.float32)
        out: Vector = fused[0].astype(np.float64)
        if clauses:
            out = w.whole * out + w.clause * fused[1:].max(axis=0)
        return out, lexical, fused[1:] if clauses else None, cosine

    def scores(self, query: str) -> list[float]:
        return [float(x) for x in self.scores_and_lexical(query)[0]]

    def rank(self, query: str, k: int | None = None) -> list[ScoredTool]:
        """Tools best first (ties keep input order); `k` caps the length.

        The order is the fused one; a tool's `score` is its relevance, the mean of the lexical
        relevance (`LexicalRanker.rank`) and the request's cosine similarity to it, which
        `min_score` is set against.
        """
        fused, lexical, clauses, cosine = self._signals(query)
        n = len(fused)
        limit = n if k is None else max(0, min(k, n))
        if limit == 0:
            return []
        order = _top(fused, limit)
        if clauses is not None and self.fusion.merge and self._operations:
            order = _merge(order, clauses, self.fusion.merge, limit)
        idx = np.asarray(order, dtype=np.intp)
        scale = self.lexical.relevance_scale(query) if lexical.any() else 0.0
        relevance = np.minimum(lexical[idx] / scale, 1.0) if scale > 0 else lexical[idx]
        if cosine is not None:
            relevance = 0.5 * relevance + 0.5 * np.clip(cosine[idx], 0.0, 1.0)
        return [
            ScoredTool(self._names[i], round(float(r), 4))
            for i, r in zip(order, relevance.tolist(), strict=True)
        ]
