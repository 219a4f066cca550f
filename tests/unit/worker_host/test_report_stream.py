"""The supervisor's report stream: lines become dicts, and its end stays visible to every later read.
No Docker needed: the container is a stand-in whose attach gives fixed chunks."""

from __future__ import annotations

from collections.abc import Iterator

from worker.host.container import EOF, ReportStream


class _Container:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def attach(self) -> Iterator[bytes]:
        return iter(self.chunks)


def test_the_end_is_seen_by_every_read_after_it() -> None:
    """After the one EOF is read, a later read returns EOF at once instead of waiting out its timeout."""
    stream = ReportStream(_Container([b'{"id": "0"}\n{"do', b'ne": 0}\n']))  # type: ignore[arg-type]
    assert [stream.next(30), stream.next(30), stream.next(30)] == [{"id": "0"}, {"done": 0}, EOF]
    assert stream.next(0) is EOF and stream.next(0) is EOF
