"""FastMCP's proxy in front of one stdio MCP server, served over streamable HTTP at `/mcp`.

Run by `bench.mcp_peers` with the Python of FastMCP's own venv (it imports nothing of Quiver):
`python fastmcp_proxy.py --port N <stdio command>`. The proxy keeps one connected client (one
pooled upstream session, as every path of `bench.mcp_endpoint` has); FastMCP's default for a
disconnected client or a config is a fresh upstream session per request.
"""

import argparse
import asyncio

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fresh", action="store_true", help="a fresh upstream session per request")
    parser.add_argument("command")
    args = parser.parse_args()
    transport = StdioTransport(command=args.command, args=[])
    if args.fresh:
        proxy = create_proxy(Client(transport), name="fastmcp-proxy")
        await proxy.run_http_async(
            host="127.0.0.1", port=args.port, log_level="warning", show_banner=False
        )
        return
    async with Client(transport) as client:
        proxy = create_proxy(client, name="fastmcp-proxy")
        await proxy.run_http_async(
            host="127.0.0.1", port=args.port, log_level="warning", show_banner=False
        )


if __name__ == "__main__":
    asyncio.run(main())
