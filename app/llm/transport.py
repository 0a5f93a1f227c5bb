"""The model calls' network layer: aiohttp's client, HTTP/1.1 parsed in C (llhttp).

A model streams one chunk per token. Read through httpcore and h11 (pure Python), every chunk
walked an HTTP state machine in Python: about a quarter of the gateway's busy time in a burst of
chats (docs/benchmarks.md, "Side by side IV" and "VI"). The client is written against aiohttp's
own API (no httpx layer on top: "Side by side VII"): its connector keeps idle connections per
host in O(1) and hands each read the bytes the parser has buffered.

What the client relies on here:
- no timeout of aiohttp's own: the client's one deadline per attempt bounds the call
  (`_Deadline` in `app/llm/client.py`); a read timer per chunk is what this layer avoids;
- no cookies, no proxy from the environment, no redirects (the client asks for none);
- a body read to its end returns its connection for the next call; a body left unfinished
  closes it (`ClientResponse.release`);
- `network_failure(exc)`: whether a failed call timed out, never reached the endpoint, or lost
  its connection.
"""

from __future__ import annotations

import functools
import io
import ssl
from typing import Literal

import aiohttp
import httpx

KEEPALIVE_S = 5.0
"""How long an idle connection to the model endpoint is kept."""

LARGE_BODY_BYTES = 1 << 20
"""A request body above this (a long conversation) is written in pieces, the loop free between
them (aiohttp warns about writing it as one piece)."""


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The model client's trust store: httpx's default (certifi's CAs), as the app's other
    outbound clients use; built once per process (~0.1 s), not once per session."""
    return httpx.create_ssl_context(trust_env=False)


def model_session(*, tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """The model client's session, made inside the running loop: no limit on connections (a
    burst opens one per concurrent call and keeps it for the next), TLS by `tls` (default:
    `default_tls()`)."""
    connector = aiohttp.TCPConnector(
        limit=0, limit_per_host=0, ssl=tls or default_tls(), keepalive_timeout=KEEPALIVE_S
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        timeout=aiohttp.ClientTimeout(),
    )


def request_body(body: bytes) -> bytes | io.BytesIO:
    """What to hand aiohttp as a request body: a fresh object per attempt (a stream reads once)."""
    return io.BytesIO(body) if len(body) > LARGE_BODY_BYTES else body


NETWORK_ERRORS = (TimeoutError, aiohttp.ClientError)
"""What a model call's network step may raise: aiohttp's errors and a timeout (the call's
deadline, or aiohttp's own when a caller sets one)."""


def network_failure(exc: BaseException) -> tuple[Literal["timeout", "connect", "lost"], str]:
    """What one of `NETWORK_ERRORS` means, and the name of the error that says it.

    "connect": the endpoint was never reached (refused, unresolvable, a certificate not
    trusted); "timeout": it did not answer in time; "lost": a connection broke or the answer
    was not HTTP.
    """
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect", name
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return "timeout", name
    return "lost", name
