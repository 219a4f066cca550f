"""A TCP proxy on loopback that can go silent: `stall()` stops forwarding both ways and keeps every socket
open, so neither end sees a FIN or a reset, as when a server's link drops without a word."""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class StallingProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target`, until `stall()`; `close()` ends every connection."""

    def __init__(self, target: int) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self.stalled = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._server]
        threading.Thread(target=self._accept, name="stallproxy-accept", daemon=True).start()

    def url(self, url: str) -> str:
        """`url` (a redis:// URL naming the target's port) pointed at this proxy instead."""
        return url.replace(f":{self.target}/", f":{self.port}/")

    def stall(self) -> None:
        """Stop forwarding: bytes sent either way from now on stay where they are; nothing is closed."""
        self.stalled.set()

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), name="stallproxy-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self._closed.is_set():
            if self.stalled.is_set():
                self._closed.wait()  # hold everything, open, until the test ends
                return
            try:
                readable, _, _ = select.select([src], [], [], 0.2)
                if not readable:
                    continue
                data = src.recv(65536)
                if self.stalled.is_set():
                    continue  # read just as the link went silent: it never arrives
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return
