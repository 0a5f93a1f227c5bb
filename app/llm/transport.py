"""The model calls' network layer: httpx's API on aiohttp's connections (`httpx-aiohttp`).

A model streams one chunk per token. Read through httpcore and h11 (pure Python), every chunk
walked an HTTP state machine in Python: about a quarter of the gateway's busy time in a burst of
chats (docs/benchmarks.md, "Side by side IV" and "VI"). aiohttp parses HTTP/1.1 in C (llhttp)
and hands the body to a buffer a read takes from; its connector keeps idle connections per host
in O(1) (no pool walk per request, so no shards). httpx stays the API the client is written
against (`Request`, `Response`, its errors, content decoding).

What the client relies on here:
- no timeout of aiohttp's own: the client's one deadline per attempt bounds the call
  (`_Deadline` in `app/llm/client.py`); a read timer per chunk is what this layer avoids;
- no cookies, no proxy from the environment, no redirects;
- `network_failure(exc)`: whether a failed call timed out, never reached the endpoint, or lost
  its connection (httpx-aiohttp maps all of aiohttp's connection errors to one httpx timeout).
"""

from __future__ import annotations

import ssl
import warnings
from typing import Literal

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

# A request body over 1 MiB (a long conversation) makes aiohttp warn that raw bytes "might lock
# the event loop": it writes them to the socket buffer as one piece, as httpcore did. Expected.
warnings.filterwarnings(
    "ignore", message="Sending a large body directly with raw bytes", category=ResourceWarning
)

KEEPALIVE_S = 5.0
"""How long an idle connection to the model endpoint is kept (httpx's default)."""


def model_transport(*, tls: ssl.SSLContext | None = None) -> httpx.AsyncBaseTransport:
    """The transport of the model client's `httpx.AsyncClient`: no limit on connections (a
    burst opens one per concurrent call and keeps it for the next), TLS by `tls` (default:
    the system's trust store)."""
    context = tls or httpx.create_ssl_context(trust_env=False)

    def session() -> aiohttp.ClientSession:  # made on first use, inside the running loop
        connector = aiohttp.TCPConnector(
            limit=0, limit_per_host=0, ssl=context, keepalive_timeout=KEEPALIVE_S
        )
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            timeout=aiohttp.ClientTimeout(),
        )

    return AiohttpTransport(client=session)


NETWORK_ERRORS = (TimeoutError, httpx.TransportError, aiohttp.ClientError)
"""What a model call's network step may raise: httpx's errors (aiohttp's mapped to them), a
timeout (the call's deadline), and aiohttp errors httpx-aiohttp does not map."""


def network_failure(exc: BaseException) -> tuple[Literal["timeout", "connect", "lost"], str]:
    """What one of `NETWORK_ERRORS` means, and the name of the error that says it.

    httpx-aiohttp maps every `aiohttp.ClientConnectionError` to `httpx.ConnectTimeout`, a
    connection the server dropped included: the aiohttp error it was raised from decides.
    "connect": the endpoint was never reached; "lost": a connection broke or the answer was
    not HTTP; "timeout": it did not answer in time.
    """
    cause = exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
    name = type(cause).__name__
    if isinstance(cause, aiohttp.ClientConnectorError) or type(cause) is httpx.ConnectError:
        return "connect", name
    if isinstance(cause, (TimeoutError, httpx.TimeoutException)):  # aiohttp's are TimeoutErrors
        return "timeout", name
    return "lost", name
