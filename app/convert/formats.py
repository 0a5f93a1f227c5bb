"""The formats a document may be in, how to tell them apart, and `convert`: any of them to
Markdown-like text (headings as `#` lines, tables as Markdown tables, `# Page 3` /
`# Slide 2: …` / `# Sheet: …` headings where a file has pages, slides or sheets).

`convert` runs in a conversion worker (`pool.py`); the binary formats import their library
only there (`office.py`, `books.py`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, Literal

from app.convert.html import html_to_markdown
from app.convert.tables import markdown_table
from app.errors import Invalid

Format = Literal[
    "text", "markdown", "html", "csv", "json", "pdf", "docx", "xlsx", "pptx", "epub"
]  # fmt: skip
FORMATS: tuple[Format, ...] = (
    "text", "markdown", "html", "csv", "json", "pdf", "docx", "xlsx", "pptx", "epub"
)  # fmt: skip
TEXT_FORMATS: frozenset[Format] = frozenset({"text", "markdown", "html", "csv", "json"})
"""Formats that are text (UTF-8): they may also be sent as a JSON body's `text`."""

_EXTENSIONS: dict[str, Format] = {
    ".txt": "text", ".text": "text", ".rst": "text", ".log": "text",
    ".md": "markdown", ".markdown": "markdown",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".csv": "csv", ".tsv": "csv",
    ".json": "json",
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx", ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".epub": "epub",
}  # fmt: skip
_CONTENT_TYPES: dict[str, Format] = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/csv": "csv",
    "text/tab-separated-values": "csv",
    "application/json": "json",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/epub+zip": "epub",
}
_NAMES = ", ".join(FORMATS)


def detect_format(filename: str | None, content_type: str | None) -> Format:
    """The format of a file, from its extension, else its content type; 422 otherwise."""
    suffix = PurePosixPath(filename or "").suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    base = (content_type or "").split(";")[0].strip().lower()
    if base in _CONTENT_TYPES:
        return _CONTENT_TYPES[base]
    if base.endswith("+json"):
        return "json"
    if base.startswith("text/") or (not suffix and base in ("", "application/octet-stream")):
        return "text"
    raise Invalid(
        f"file: cannot tell the format of {filename!r} ({base or 'no content type'}); "
        f"send one of {_NAMES} or pass format"
    )


def decode(raw: bytes, *, field: str = "file") -> str:
    """UTF-8 (a BOM is dropped), without NUL characters; anything else is a 422, never a
    guess."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Invalid(f"{field}: not UTF-8 text (byte {exc.start}); send UTF-8 text") from exc
    if "\x00" in text:
        raise Invalid(f"{field}: contains a NUL character (byte {raw.index(0)}); not text")
    return text


def _csv(text: str) -> str:
    sample = text[:20_000]
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return markdown_table(csv.reader(io.StringIO(text), dialect))


def _json_value(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for item in value for k in item))
        if len(keys) <= 12:
            rows = [keys, *([_scalar(item.get(k)) for k in keys] for item in value)]
            return markdown_table(rows)
    return json.dumps(value, ensure_ascii=False, indent=2)


def _scalar(value: object) -> object:
    return value if not isinstance(value, dict | list) else json.dumps(value, ensure_ascii=False)


def _json(text: str) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Invalid(f"file: not valid JSON ({exc})") from exc
    if isinstance(data, dict):
        return "\n\n".join(f"# {key}\n\n{_json_value(value)}" for key, value in data.items())
    return _json_value(data)


def _text_converter(fn: Callable[[str], str]) -> Callable[[bytes], str]:
    return lambda raw: fn(decode(raw))


def convert(raw: bytes, fmt: Format) -> str:
    """The document's text; `Invalid` (422) with the reason when it cannot be read."""
    from app.convert import books, office  # the binary formats' libraries, in the worker only

    converters: dict[Format, Callable[[bytes], str]] = {
        "text": _text_converter(lambda t: t.replace("\r\n", "\n")),
        "markdown": _text_converter(lambda t: t.replace("\r\n", "\n")),
        "html": _text_converter(html_to_markdown),
        "csv": _text_converter(_csv),
        "json": _text_converter(_json),
        "pdf": books.pdf,
        "docx": office.docx,
        "xlsx": office.xlsx,
        "pptx": office.pptx,
        "epub": books.epub,
    }
    try:
        text = converters[fmt](raw)
    except Invalid:
        raise
    except MemoryError as exc:
        raise Invalid(f"file: too large to convert as {fmt} in the converter's memory") from exc
    except Exception as exc:  # any library's error on a damaged or foreign file
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise Invalid(f"file: cannot read it as {fmt} ({reason})") from exc
    return text.replace("\x00", "\ufffd")
