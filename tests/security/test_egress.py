"""The outbound guard: hostile URL corpus, allow-list, pinned connects, redirects, TLS names."""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.security.egress import (
    ConnectFailed,
    EgressBlocked,
    EgressGuard,
    FetchError,
    TooManyRedirects,
    blocked_reason,
    guarded_request,
    new_http_client,
)
from tests.connectors.server_app import LocalServer
from tests.fixtures.tls import self_signed

CORPUS = Path(__file__).with_name("egress_corpus.tsv")
LOOPBACK = Settings(egress_allow_cidrs=["127.0.0.0/8"])


def _corpus() -> list[tuple[str, str]]:
    rows = []
    for line in CORPUS.read_text().splitlines():
        if line and not line.startswith("#"):
            url, message = line.split("\t")
            rows.append((url, message))
    return rows


class RecordingTransport(httpx.AsyncHTTPTransport):
    """The real transport, noting every request it is asked to send."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await super().handle_async_request(request)


@pytest.fixture
async def recording() -> AsyncIterator[tuple[httpx.AsyncClient, RecordingTransport]]:
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        yield client, transport


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer().start()
    yield srv
    srv.stop()


def test_corpus_is_large_enough() -> None:
    assert len(_corpus()) >= 30


@pytest.mark.parametrize(("url", "message"), _corpus())
async def test_hostile_urls_are_refused_before_any_connection(
    recording: tuple[httpx.AsyncClient, RecordingTransport], url: str, message: str
) -> None:
    client, transport = recording
    with pytest.raises(FetchError) as caught:
        await guarded_request(
            client, EgressGuard(Settings()), "GET", url, timeout=2, max_bytes=1024
        )
    assert str(caught.value) == message
    assert transport.sent == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("2002:808:808::1", None),
        ("100.127.255.255", "CGNAT shared address space"),
        ("100.128.0.1", None),
        ("64:ff9b::808:808", "NAT64"),
        ("::ffff:8.8.8.8", "IPv4-mapped IPv6"),
        ("fec0::1", "site-local"),
        ("169.254.170.2", "cloud metadata"),
    ],
)
def test_address_classification(address: str, reason: str | None) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) == reason


async def test_allow_list_opens_a_range_deliberately() -> None:
    target = await EgressGuard(LOOPBACK).check_url("http://localhost:8080/x?y=1")
    assert (target.host, target.port, target.addresses) == (
        "localhost",
        8080,
        (ipaddress.ip_address("127.0.0.1"),),
    )
    with pytest.raises(EgressBlocked, match=r"10\.0\.0\.1 \(private\)"):
        await EgressGuard(LOOPBACK).check_url("http://10.0.0.1/")


async def test_allow_list_opens_metadata_only_by_exact_address() -> None:
    wide = EgressGuard(Settings(egress_allow_cidrs=["169.254.0.0/16"]))
    assert (await wide.check_url("http://169.254.1.1/")).addresses
    with pytest.raises(EgressBlocked, match="cloud metadata"):
        await wide.check_url("http://169.254.169.254/")
    exact = EgressGuard(Settings(egress_allow_cidrs=["169.254.169.254/32"]))
    assert (await exact.check_url("http://169.254.169.254/")).is_literal


async def test_odd_ip_spellings_stay_refused_inside_an_allowed_range() -> None:
    with pytest.raises(EgressBlocked) as caught:
        await EgressGuard(LOOPBACK).check_url("http://0x7f000001:81/")
    assert str(caught.value) == (
        "Egress blocked: '0x7f000001' is a non-canonical spelling of 127.0.0.1; "
        "write the address in standard form (http://0x7f000001:81/)"
    )


async def test_connects_to_the_checked_address_with_the_host_name_kept(
    recording: tuple[httpx.AsyncClient, RecordingTransport], server: LocalServer
) -> None:
    client, transport = recording
    resp = await guarded_request(
        client,
        EgressGuard(LOOPBACK),
        "GET",
        f"http://localhost:{server.port}/hello",
        timeout=5,
        max_bytes=10_000,
    )
    assert resp.status_code == 200
    (sent,) = transport.sent
    assert sent.url.host == "127.0.0.1"  # no second lookup: the transport gets the IP
    assert server.last["headers"]["host"] == f"localhost:{server.port}"
    assert resp.final_url == f"http://localhost:{server.port}/hello"


async def test_redirect_to_a_private_address_is_refused() -> None:
    public_ish = LocalServer("127.0.0.2").start()
    private = LocalServer("127.0.0.1").start()
    try:
        guard = EgressGuard(Settings(egress_allow_cidrs=["127.0.0.2/32"]))
        async with httpx.AsyncClient() as client:
            ok = await guarded_request(
                client, guard, "GET", f"{public_ish.url}/fine", timeout=5, max_bytes=10_000
            )
            assert ok.status_code == 200
            for target in (f"{private.url}/secret", f"http://localhost:{private.port}/secret"):
                with pytest.raises(EgressBlocked) as caught:
                    await guarded_request(
                        client,
                        guard,
                        "GET",
                        f"{public_ish.url}/redirect?to={target}",
                        timeout=5,
                        max_bytes=10_000,
                    )
                assert str(caught.value) == (
                    f"Egress blocked: 127.0.0.1 (loopback) is not an allowed destination "
                    f"for {target}; to allow it, add 127.0.0.1/32 to QUIVER_EGRESS_ALLOW_CIDRS"
                )
        assert private.log == []
    finally:
        public_ish.stop()
        private.stop()


async def test_redirect_loops_stop_after_five_hops(
    recording: tuple[httpx.AsyncClient, RecordingTransport], server: LocalServer
) -> None:
    client, transport = recording
    with pytest.raises(TooManyRedirects) as caught:
        await guarded_request(
            client, EgressGuard(LOOPBACK), "GET", f"{server.url}/loop", timeout=5, max_bytes=1000
        )
    assert str(caught.value) == f"Too many redirects (over 5) from {server.url}/loop"
    assert len(transport.sent) == 6


async def test_see_other_turns_a_post_into_a_get(server: LocalServer) -> None:
    async with httpx.AsyncClient() as client:
        resp = await guarded_request(
            client,
            EgressGuard(LOOPBACK),
            "POST",
            f"{server.url}/redirect",
            params={"to": "/after", "code": "303"},
            json={"a": 1},
            timeout=5,
            max_bytes=10_000,
        )
    assert (resp.status_code, resp.redirects) == (200, 1)
    assert (server.last["method"], server.last["path"], server.last["body"]) == (
        "GET",
        "/after",
        None,
    )
    assert "content-type" not in server.last["headers"]


async def test_response_is_capped_while_streaming(server: LocalServer) -> None:
    async with httpx.AsyncClient() as client:
        resp = await guarded_request(
            client,
            EgressGuard(LOOPBACK),
            "GET",
            f"{server.url}/big?size=1000000",
            timeout=5,
            max_bytes=4096,
        )
    assert (len(resp.body), resp.truncated) == (4096, True)


# --- TLS: the certificate is checked against the host name, not the pinned IP ---------


@pytest.fixture(scope="module")
def localhost_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(localhost_cert: tuple[str, str]) -> Iterator[LocalServer]:
    srv = LocalServer(tls=localhost_cert).start()
    yield srv
    srv.stop()


async def test_https_through_any_client_keeps_sni_and_certificate_name(
    localhost_cert: tuple[str, str], tls_server: LocalServer
) -> None:
    transport = RecordingTransport(verify=ssl.create_default_context(cafile=localhost_cert[0]))
    async with httpx.AsyncClient(transport=transport) as client:
        guard = EgressGuard(LOOPBACK)
        resp = await guarded_request(
            client,
            guard,
            "GET",
            f"https://localhost:{tls_server.port}/tls",
            timeout=5,
            max_bytes=10_000,
        )
        assert resp.status_code == 200
        assert transport.sent[0].url.host == "127.0.0.1"
        assert transport.sent[0].extensions["sni_hostname"] == "localhost"
        # same server, same IP, but by address: a fresh TLS session fails verification
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await guarded_request(
                client, guard, "GET", f"{tls_server.url}/tls", timeout=5, max_bytes=10_000
            )


async def test_https_through_the_pinned_client(
    localhost_cert: tuple[str, str], tls_server: LocalServer
) -> None:
    verify = ssl.create_default_context(cafile=localhost_cert[0])
    async with new_http_client(LOOPBACK, verify=verify) as client:
        guard = EgressGuard(LOOPBACK)
        for _ in range(2):  # the second call reuses the pooled connection
            resp = await guarded_request(
                client,
                guard,
                "GET",
                f"https://localhost:{tls_server.port}/tls",
                timeout=5,
                max_bytes=10_000,
            )
            assert resp.status_code == 200
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await guarded_request(
                client, guard, "GET", f"{tls_server.url}/tls", timeout=5, max_bytes=10_000
            )


async def test_pinned_client_refuses_requests_that_skipped_the_guard(server: LocalServer) -> None:
    async with new_http_client(LOOPBACK) as client:
        with pytest.raises(httpx.ConnectError, match="was not checked by the egress guard"):
            await client.get(f"{server.url}/direct")
    assert all(entry["path"] != "/direct" for entry in server.log)


async def test_lenient_pinned_client_serves_trusted_callers_and_still_pins(
    server: LocalServer,
) -> None:
    async with new_http_client(Settings(), strict=False) as client:
        direct = await client.get(f"{server.url}/trusted")  # e.g. the LLM endpoint
        assert direct.status_code == 200
        with pytest.raises(EgressBlocked, match="loopback"):
            await guarded_request(
                client,
                EgressGuard(Settings()),
                "GET",
                f"{server.url}/tool",
                timeout=5,
                max_bytes=1000,
            )
    assert [e["path"] for e in server.log if e["path"] in ("/trusted", "/tool")] == ["/trusted"]
