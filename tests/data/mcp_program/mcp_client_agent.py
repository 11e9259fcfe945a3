"""A program agent for tests: reads the MCP configuration the plugin wrote, starts
the server like Claude Code would, calls ``lookup_order`` once with the order id in the prompt, and
prints the tool's text as its reply (JSON lines: a reply and a session id)."""

from __future__ import annotations

import json
import re
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main(config_path: str, prompt: str) -> None:
    server = json.loads(open(config_path, encoding="utf-8").read())["mcpServers"]["gauge"]
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])
    order = (re.findall(r"[A-Z]\d{3}", prompt) or ["A123"])[0]
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("lookup_order", {"order_id": order})
    text = result.content[0].text
    print(json.dumps({"reply": f"The order: {text}", "session": "scripted-session"}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
