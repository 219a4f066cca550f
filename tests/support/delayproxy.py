"""A loopback TCP proxy that puts a machine at internet distance: every chunk read from either side is held
`delay_s` before it is written to the other, in the order it came (one way; a round trip costs twice that).
Bytes still flow while earlier ones wait, so the link has the delay but no bandwidth limit of its own.

asyncio on a thread of its own, for a benchmark's processes (`benchmarks/fleet.py`): workers reach Redis through
it, the coordinator directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time


class DelayProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target`, each chunk `delay_s` late in each direction."""

    def __init__(self, target: int, delay_s: float) -> None:
        self.target = target
        self.delay_s = delay_s
        self.connections = 0
        self.requests = 0  # chunks read from the clients' side: what they sent Redis (a command or a pipeline each)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    def url(self, url: str) -> str:
        """`url` (a redis:// URL naming the target's port, user and password kept) pointed at this proxy."""
        return url.replace(f":{self.target}/", f":{self.port}/")

    def close(self) -> None:
        """Stop listening and end every connection."""

        async def shut() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_writer.close()
            return
        self.connections += 1
        try:
            await asyncio.gather(
                self._pipe(client_reader, up_writer, counted=True),
                self._pipe(up_reader, client_writer),
            )
        except asyncio.CancelledError:
            pass  # `close`: the connection ends here (re-raised, asyncio's stream callback would log it)
        finally:
            for writer in (client_writer, up_writer):
                with contextlib.suppress(Exception):
                    writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, counted: bool = False) -> None:
        """Read chunks as they come and write each `delay_s` after it was read, in order; EOF travels too."""
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await held.get()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while True:
                data = await reader.read(65536)
                held.put_nowait((time.monotonic() + self.delay_s, data))
                self.requests += counted and bool(data)
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            sender.cancel()
        finally:
            if not sender.done():
                sender.cancel()
