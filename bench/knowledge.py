"""Knowledge retrieval quality and cost on the labelled corpus shipped with the tests.

Run: `.venv/bin/python -m bench.knowledge`. Data: `tests/data/knowledge/` (Python language
reference pages, the python-dotenv README, two rustdoc book pages; licences in
`tests/data/README.md`) with `questions.jsonl` (30 questions written for it, each naming the
document and a passage the answer is in) and `unanswerable.jsonl` (10 off-topic questions).

A hit is a returned chunk of the right document containing the passage. Strategies: `lexical`
(BM25F only), `embedding` (WordLlama cosine only) and `hybrid` (what the `knowledge` tool
uses). The abstain columns apply the default `min_score` to each question's best score.
CPU times are `time.process_time`, so a busy machine slows them less than wall time.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from app.knowledge.index import LEXICAL_WEIGHT, ChunkIndex, IndexedChunk, chunk_fields_text
from app.knowledge.prepare import prepare
from app.pipeline.sources.knowledge import DEFAULT_MIN_SCORE
from app.retrieval.embedding import Embedder, to_bytes
from bench.common import percentile, print_table

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "knowledge"
SUFFIXES = {".txt": "text", ".md": "markdown", ".html": "html"}
STRATEGIES = {"lexical": 1.0, "embedding": 0.0, "hybrid": LEXICAL_WEIGHT}
K = 5


def _read(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def load_corpus() -> tuple[list[IndexedChunk], list[str]]:
    """Every chunk of the corpus and the text embedded for it (as the service does)."""
    base = uuid.uuid4()
    chunks: list[IndexedChunk] = []
    texts: list[str] = []
    for path in sorted(p for p in DATA.rglob("*") if p.suffix in SUFFIXES):
        fmt = SUFFIXES[path.suffix]
        document_id = uuid.uuid4()
        for position, chunk in enumerate(prepare(path.read_bytes(), fmt).chunks):  # type: ignore[arg-type]
            chunks.append(
                IndexedChunk(
                    knowledge_base_id=base,
                    document_id=document_id,
                    document=path.name,
                    heading=chunk.heading_path,
                    position=position,
                    offset=chunk.offset,
                    text=chunk.text,
                )
            )
            texts.append(chunk_fields_text(path.name, chunk.heading_path, chunk.text))
    return chunks, texts


def is_hit(chunk: IndexedChunk, question: dict[str, Any]) -> bool:
    passage = question["contains"]
    return bool(
        chunk.document == question["document"]
        and (passage in chunk.text or passage in chunk.heading)
    )


def run() -> dict[str, Any]:
    """Measure and print; return the numbers for the harness."""
    questions, unanswerable = _read("questions.jsonl"), _read("unanswerable.jsonl")
    chunks, texts = load_corpus()
    Embedder.model()
    start = time.process_time()
    embeddings = [to_bytes(v) for v in Embedder.embed(texts)]
    embed_ms = (time.process_time() - start) * 1000
    numbers: dict[str, Any] = {
        "chunks": len(chunks),
        "questions": len(questions),
        "unanswerable": len(unanswerable),
        "embed_corpus_cpu_ms": round(embed_ms, 1),
        "min_score": DEFAULT_MIN_SCORE,
    }
    rows = []
    for strategy, weight in STRATEGIES.items():
        start = time.process_time()
        index = ChunkIndex(chunks, embeddings, lexical_weight=weight)
        build_ms = (time.process_time() - start) * 1000
        at1 = at5 = rr = abstained = 0.0
        query_ms: list[float] = []
        for q in questions:
            start = time.process_time()
            hits = index.search(q["question"], limit=K)
            query_ms.append((time.process_time() - start) * 1000)
            ranks = [i for i, h in enumerate(hits, start=1) if is_hit(h.chunk, q)]
            at1 += bool(ranks and ranks[0] == 1)
            at5 += bool(ranks)
            rr += 1.0 / ranks[0] if ranks else 0.0
            abstained += not hits or hits[0].score < DEFAULT_MIN_SCORE
        answered = sum(
            bool(hits) and max(h.score for h in hits) >= DEFAULT_MIN_SCORE
            for hits in (index.search(u["question"], limit=K) for u in unanswerable)
        )
        n = len(questions)
        numbers[strategy] = m = {
            "recall_at_1": round(at1 / n, 3),
            "recall_at_5": round(at5 / n, 3),
            "mrr": round(rr / n, 3),
            "false_abstain_rate": round(abstained / n, 3),
            "off_topic_answered_rate": round(answered / len(unanswerable), 3),
            "build_cpu_ms": round(build_ms, 2),
            "query_cpu_p50_ms": round(percentile(query_ms, 50), 3),
            "query_cpu_p95_ms": round(percentile(query_ms, 95), 3),
        }
        rows.append([strategy, m["recall_at_1"], m["recall_at_5"], m["mrr"],
                     m["false_abstain_rate"], m["off_topic_answered_rate"],
                     m["query_cpu_p50_ms"]])  # fmt: skip
    print(
        f"{len(chunks)} chunks, {len(questions)} questions, {len(unanswerable)} off-topic; "
        f"embedding the corpus: {embed_ms:.0f} ms CPU; min_score {DEFAULT_MIN_SCORE}"
    )
    print_table(
        rows,
        headers=[
            "strategy",
            "recall@1",
            "recall@5",
            "MRR",
            "false abstain",
            "off-topic answered",
            "query CPU p50 ms",
        ],
    )
    from bench import knowledge_formats

    numbers["formats"] = knowledge_formats.run()
    return numbers


if __name__ == "__main__":
    run()
