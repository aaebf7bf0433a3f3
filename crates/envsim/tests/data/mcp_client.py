"""Drives an envsim session's MCP endpoint with the official Python MCP client.

Usage: mcp_client.py URL TOKEN — lists the tools, calls `get_ticket` twice (a known and an
unknown ticket) and `create_ticket` once, and prints one JSON object with what came back.
Exits 3 when the `mcp` package is not installed. The client's own warnings (such as a
session termination the server refused) are printed under `warnings`.
"""

import json
import logging
import sys

try:
    import anyio
    import httpx2 as httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
except ImportError as e:  # pragma: no cover - reported to the test
    print(f"the mcp package is not installed: {e}", file=sys.stderr)
    sys.exit(3)


def field(obj, *names):
    """The first of `names` the object has (the client's field names changed between versions)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(names[0])


def text_of(result):
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


class Collect(logging.Handler):
    """Keeps the text of every warning the client logs."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.texts = []

    def emit(self, record):
        self.texts.append(record.getMessage())


async def main(url, token):
    headers = {"Authorization": f"bearer {token}"} if token else {}
    collect = Collect()
    logging.getLogger().addHandler(collect)
    out = {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                out["tools"] = sorted(t.name for t in tools.tools)
                out["schema"] = next(field(t, "input_schema", "inputSchema") for t in tools.tools if t.name == "get_ticket")
                found = await session.call_tool("get_ticket", {"ticket_id": "T1"})
                out["found"] = {"text": text_of(found), "is_error": bool(field(found, "is_error", "isError"))}
                missing = await session.call_tool("get_ticket", {"ticket_id": "T9"})
                out["missing"] = {"text": text_of(missing), "is_error": bool(field(missing, "is_error", "isError"))}
                created = await session.call_tool("create_ticket", {"title": "from mcp"})
                out["created"] = {"text": text_of(created), "is_error": bool(field(created, "is_error", "isError"))}
    out["warnings"] = collect.texts
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
