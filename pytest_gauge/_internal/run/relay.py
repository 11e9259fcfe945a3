"""The byte relay that lets a sandboxed program reach the run's recording proxy
(docs/protocol.md#programs-and-sandboxing).

The proxy listens on 127.0.0.1 on the host, which a sandbox's own network namespace cannot see. So the
host side (:class:`HostRelay`) listens on a Unix socket, bound into the sandbox, and relays each
connection to the proxy's TCP port; inside, :data:`INSIDE` (run by the sandbox before the program)
listens on 127.0.0.1:<port> and relays to that socket, then execs the program. Bytes only: no HTTP is
parsed on either side, so the proxy sees exactly what the program sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["INSIDE", "HostRelay", "pipe"]

CHUNK = 64 * 1024

INSIDE = r"""
import os, socket, sys, threading
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst,):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
def serve(conn):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(path)
    except OSError:
        conn.close(); up.close(); return
    a = threading.Thread(target=pump, args=(conn, up), daemon=True)
    a.start(); pump(up, conn); a.join(); conn.close(); up.close()
if os.fork() == 0:
    os.setsid()
    while True:
        c, _ = listener.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
listener.close()
os.execvp(argv[0], argv)
"""
"""The inner relay (``python -I -S -c INSIDE <port> <socket> <program argv...>``): binds the port
before the program starts, forks the relay off (it ends with the sandbox's PID namespace), execs the
program. Standard library only, no import of this package."""


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until end of stream, then half-close ``writer``."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


class HostRelay:
    """A Unix socket on the host relaying every connection to ``127.0.0.1:<port>`` (the proxy), served
    by a loop on a daemon thread of its own; one per process, started on first use."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.port = port
        self.host = host
        self.folder = Path(tempfile.mkdtemp(prefix="gauge-relay-"))
        self.path = self.folder / "proxy.sock"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gauge-relay", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_unix_server(self._serve, str(self.path)))
        os.chmod(self.path, 0o600)
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()

    def close(self) -> None:
        """Stop serving and remove the socket's folder."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        shutil.rmtree(self.folder, ignore_errors=True)
