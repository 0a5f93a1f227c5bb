"""Knowledge retrieval over documents in every format, and the cost of ingesting them.

Run: `.venv/bin/python -m bench.knowledge_formats` (also part of `bench.knowledge`). Corpus:
the ten planted documents of `tests/knowledge/files.py` (PDF, DOCX, XLSX, PPTX, EPUB, CSV,
JSON, HTML, Markdown, text; made with fpdf2, python-docx, openpyxl, python-pptx and EbookLib from
the Python reference text in `tests/data/knowledge/`, PSF-2.0) among the text corpus of
`bench.knowledge` as distractors. Questions: two phrasings per planted fact (20), whose answers sit
in a PDF page, a DOCX table, an XLSX sheet, a PPTX slide table, an EPUB chapter and so on.

Honest weights: the lexical weight of the fusion is chosen on the even-numbered questions (MRR)
and recall@5 / MRR are reported on the odd-numbered ones, beside the shipped default.
Ingestion MB/s per format: conversion and chunking (`prepare`, in this process) plus embedding,
over a larger document of each format (every reference topic), CPU time.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.convert.formats import Format, detect_format
from app.knowledge.index import LEXICAL_WEIGHT, ChunkIndex, IndexedChunk, chunk_fields_text
from app.knowledge.prepare import prepare
from app.retrieval.embedding import Embedder, to_bytes
from bench.common import percentile, print_table
from tests.knowledge import files

K = 5
WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
REPHRASED = {
    "handbook.pdf": "Skerry Point lighthouse automation year",
    "harbour.docx": "nightly price for the harbour",
    "tides.xlsx": "spring tide height north quay metres",
    "ferries.pptx": "departure time of the final ferry",
    "keeper.epub": "keeper's dog name",
    "moorings.csv": "lifeboat berth",
    "signals.json": "meaning of a green flare",
    "notes.html": "where to find the spare lamp",
    "logbook.md": "foghorn repair",
    "radio.txt": "harbour radio channel",
}


def _questions() -> list[dict[str, str]]:
    out = []
    for planted in files.PLANTED:
        for question in (planted.question, REPHRASED[planted.filename]):
            out.append({"question": question, "document": planted.filename,
                        "contains": planted.answer})  # fmt: skip
    return out


def _chunks(name: str, raw: bytes, fmt: Format) -> list[tuple[IndexedChunk, str]]:
    document = uuid.uuid4()
    return [
        (
            IndexedChunk(
                knowledge_base_id=uuid.UUID(int=0),
                document_id=document,
                document=name,
                heading=c.heading_path,
                position=i,
                offset=c.offset,
                text=c.text,
            ),
            chunk_fields_text(name, c.heading_path, c.text),
        )
        for i, c in enumerate(prepare(raw, fmt).chunks)
    ]


def _corpus() -> tuple[list[IndexedChunk], list[bytes]]:
    from bench.knowledge import DATA, SUFFIXES

    pairs: list[tuple[IndexedChunk, str]] = []
    for planted in files.PLANTED:
        pairs += _chunks(planted.filename, planted.make(), detect_format(planted.filename, None))
    for path in sorted(p for p in DATA.rglob("*") if p.suffix in SUFFIXES):
        pairs += _chunks(path.name, path.read_bytes(), SUFFIXES[path.suffix])  # type: ignore[arg-type]
    embeddings = [to_bytes(v) for v in Embedder.embed([t for _, t in pairs])]
    return [c for c, _ in pairs], embeddings


def _score(index: ChunkIndex, questions: list[dict[str, str]]) -> tuple[float, float]:
    at5 = rr = 0.0
    for q in questions:
        hits = index.search(q["question"], limit=K)
        ranks = [
            i
            for i, h in enumerate(hits, start=1)
            if h.chunk.document == q["document"] and q["contains"] in h.chunk.text
        ]
        at5 += bool(ranks)
        rr += 1.0 / ranks[0] if ranks else 0.0
    return at5 / len(questions), rr / len(questions)


def _large(fmt: str) -> bytes:
    topics = sorted(p.stem for p in files.DATA.glob("*.txt"))
    texts = [(name, files.topic(name, 6000)) for name in topics]
    if fmt == "pdf":
        return files.pdf([t for _, t in texts])
    if fmt == "docx":
        return files.docx(
            "Reference", texts, [["Topic", "Chars"]] + [[n, str(len(t))] for n, t in texts]
        )
    if fmt == "xlsx":
        rows: list[list[object]] = [["Topic", "Line"]]
        rows += [[n, line] for n, t in texts for line in t.splitlines() if line.strip()]
        return files.xlsx({"Lines": rows})
    if fmt == "pptx":
        return files.pptx(
            [(n, t[:900]) for n, t in texts], ("Topics", [["Topic"], *[[n] for n, _ in texts]])
        )
    if fmt == "epub":
        return files.epub("Reference", texts)
    body = "\n\n".join(f"# {n}\n\n{t}" for n, t in texts)
    if fmt == "html":
        paragraphs = "".join(
            f"<h1>{n}</h1>" + "".join(f"<p>{p}</p>" for p in t.split("\n\n")) for n, t in texts
        )
        return f"<html><body>{paragraphs}</body></html>".encode()
    return body.encode()


def ingestion() -> dict[str, dict[str, float]]:
    """MB/s (CPU) of conversion + chunking, and of embedding, per format."""
    out = {}
    for fmt in ("pdf", "docx", "xlsx", "pptx", "epub", "html", "markdown", "text"):
        raw = _large(fmt)
        prepare(raw, fmt)  # type: ignore[arg-type]  # the library's imports are not measured
        start = time.process_time()
        prepared = prepare(raw, fmt)  # type: ignore[arg-type]
        convert_s = time.process_time() - start
        start = time.process_time()
        Embedder.embed([c.text for c in prepared.chunks])
        embed_s = time.process_time() - start
        mb = len(raw) / 1e6
        out[fmt] = {
            "bytes": len(raw),
            "chunks": len(prepared.chunks),
            "convert_mb_per_s": round(mb / max(convert_s, 1e-6), 2),
            "ingest_mb_per_s": round(mb / max(convert_s + embed_s, 1e-6), 2),
        }
    return out


def run() -> dict[str, Any]:
    questions = _questions()
    tune, held_out = questions[0::2], questions[1::2]
    chunks, embeddings = _corpus()
    by_weight = {w: ChunkIndex(chunks, embeddings, lexical_weight=w) for w in WEIGHTS}
    tuned = {w: _score(index, tune) for w, index in by_weight.items()}
    chosen = max(WEIGHTS, key=lambda w: (tuned[w][1], tuned[w][0], -abs(w - LEXICAL_WEIGHT)))
    default = by_weight.get(LEXICAL_WEIGHT) or ChunkIndex(chunks, embeddings)
    report = {"chosen": _score(by_weight[chosen], held_out), "default": _score(default, held_out)}
    query_ms = []
    for _ in range(5):
        for q in questions:
            start = time.perf_counter()
            default.search(q["question"], limit=K)
            query_ms.append((time.perf_counter() - start) * 1000)
    speed = ingestion()
    numbers: dict[str, Any] = {
        "chunks": len(chunks),
        "questions_tune": len(tune),
        "questions_held_out": len(held_out),
        "chosen_lexical_weight": chosen,
        "held_out_chosen": {
            "recall_at_5": round(report["chosen"][0], 3),
            "mrr": round(report["chosen"][1], 3),
        },
        "held_out_default": {
            "recall_at_5": round(report["default"][0], 3),
            "mrr": round(report["default"][1], 3),
        },
        "query_p50_ms": round(percentile(query_ms, 50), 2),
        "query_p99_ms": round(percentile(query_ms, 99), 2),
        "ingestion": speed,
    }
    print(f"formats corpus: {len(chunks)} chunks; weight chosen on {len(tune)} questions: "
          f"{chosen} (default {LEXICAL_WEIGHT}); reported on {len(held_out)} held-out")  # fmt: skip
    rows = [[f"{label} {w}", round(report[label][0], 3), round(report[label][1], 3)]
            for label, w in (("chosen", chosen), ("default", LEXICAL_WEIGHT))]  # fmt: skip
    print_table(rows, headers=["weight (held-out)", "recall@5", "MRR"])
    print(f"query wall p50 {numbers['query_p50_ms']} ms, p99 {numbers['query_p99_ms']} ms")
    print_table(
        [[f, v["bytes"], v["chunks"], v["convert_mb_per_s"], v["ingest_mb_per_s"]]
         for f, v in speed.items()],
        headers=["format", "bytes", "chunks", "convert MB/s", "ingest MB/s (with embedding)"],
    )  # fmt: skip
    return numbers


if __name__ == "__main__":
    run()
