"""The MCP server a program agent starts (``python -m pytest_gauge._internal.run.mcp_relay <socket>``,
docs/protocol.md#mcp): a byte relay between its stdio and the transcript's Unix socket, where the
plugin's own process serves the suite's tools and records each call. It holds no tool, reads no suite
module, writes no file: a program that starts it (or anything else) can only make real calls.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

__all__ = ["main"]


def _upstream(sock: socket.socket) -> None:
    """The program's requests (stdin) to the server, then end of input."""
    try:
        while chunk := os.read(0, 1 << 16):
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Relay until the server closes the connection; exit 2 naming the socket when it cannot be reached."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pytest_gauge._internal.run.mcp_relay SOCKET", file=sys.stderr)
        return 2
    path = Path(args[0])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.chdir(path.parent)  # a relative name: a socket path may be longer than AF_UNIX allows
        sock.connect(path.name)
    except OSError as exc:
        print(f"pytest-gauge MCP relay: cannot reach the tool server at {path}: {exc}", file=sys.stderr)
        return 2
    threading.Thread(target=_upstream, args=(sock,), daemon=True).start()
    out = sys.stdout.buffer
    try:
        while chunk := sock.recv(1 << 16):
            out.write(chunk)
            out.flush()
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
