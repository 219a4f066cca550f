"""Dealing by room (gate.core.trust.dealing): who takes which turn now, how much each worker may hold, and which
straggler an idle worker is sent a copy of."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gate.core.trust.dealing import MAX_PROCESSES, ROOM_PER_PROCESS, Out, Seat, deal, room_for, straggler

WORKERS = ("a", "b", "c")


def test_room_is_two_batches_a_process_and_a_worker_cannot_claim_more_than_its_cap() -> None:
    """A worker's process count is its own word: it earns room for at most MAX_PROCESSES of them."""
    assert room_for(1) == ROOM_PER_PROCESS and room_for(0) == ROOM_PER_PROCESS
    assert room_for(10_000) == ROOM_PER_PROCESS * MAX_PROCESSES


def test_equal_workers_take_their_own_turns_in_order() -> None:
    """With room for everything, each worker takes its own list head first, one turn at a time round the seats."""
    lists = {"a": [1, 1], "b": [1, 1]}
    assert deal(lists, [Seat("a", 4), Seat("b", 4)]) == (("a", "a"), ("b", "b"), ("a", "a"), ("b", "b"))


def test_a_worker_without_turns_takes_the_last_of_the_one_furthest_behind_but_leaves_it_one() -> None:
    """a's list is empty: it takes b's tail while b keeps more than one unsent turn; a full b takes nothing."""
    assert deal({"a": [], "b": [1, 1, 1, 1]}, [Seat("a", 2), Seat("b", 2, holding=2)]) == (("a", "b"), ("a", "b"))
    full = [Seat("b", 1, holding=1), Seat("c", 1, holding=1)]
    assert deal({"a": [], "b": [1], "c": [1, 1]}, [Seat("a", 2), *full]) == (("a", "c"),)


def test_a_gone_workers_turns_all_go_to_the_workers_up() -> None:
    """A worker without a seat (presumed gone) keeps nothing: its every turn is taken, its own first."""
    assert deal({"a": [1], "gone": [1, 1]}, [Seat("a", 4)]) == (("a", "a"), ("a", "gone"), ("a", "gone"))


def test_a_pair_waits_for_room_for_both_sides_unless_it_is_larger_than_the_whole_room() -> None:
    """A turn of two batches needs two free places; one larger than a worker's room goes once it holds nothing."""
    assert deal({"a": [2]}, [Seat("a", 2, holding=1)]) == ()
    assert deal({"a": [3]}, [Seat("a", 2)]) == (("a", "a"),)
    assert deal({"a": [3]}, [Seat("a", 2, holding=1)]) == ()


@given(
    st.dictionaries(st.sampled_from(WORKERS), st.lists(st.integers(1, 2), max_size=8), min_size=1),
    st.lists(st.tuples(st.sampled_from(WORKERS), st.integers(1, 6), st.integers(0, 6)), max_size=3),
)
def test_no_worker_is_given_more_than_its_room_and_every_turn_comes_off_a_list(
    lists: dict[str, list[int]], raw: list[tuple[str, int, int]]
) -> None:
    """Whatever the lists and seats: each dealt turn is taken from a list (own head, else another's tail), and a
    worker's holdings stay within its room."""
    seats = list({w: Seat(w, room, min(holding, room)) for w, room, holding in raw}.values())
    dealt = deal(lists, seats)
    left = {w: list(sizes) for w, sizes in lists.items()}
    held = {s.worker: s.holding for s in seats}
    rooms = {s.worker: s.room for s in seats}
    for taker, source in dealt:
        assert taker in rooms
        assert taker == source or not left.get(taker), "a worker takes another's turns only once its own are out"
        size = left[source].pop(0 if taker == source else -1)
        if taker != source and source in rooms:
            assert left[source], "a seated worker's last turn stays its own"
        assert held[taker] + size <= rooms[taker] or held[taker] == 0
        held[taker] += size
    for seat in seats:  # nothing dealable is left behind: a worker with room has nothing it could take
        mine = left.get(seat.worker, [])
        if mine and rooms[seat.worker] - held[seat.worker] >= min(mine[0], rooms[seat.worker]) > 0:
            raise AssertionError((seat, left, held))


def test_an_idle_worker_gets_a_copy_of_the_oldest_straggler_it_was_never_sent() -> None:
    """With no batch waiting behind another: only batches out on another worker for longer than the wave's
    typical answer, the oldest first, never one it was tried for or one already copied."""
    out = [
        Out("t1", "b", sent_at=0.0, tried=frozenset({"b"})),
        Out("t3", "c", sent_at=0.5, tried=frozenset({"c", "a"})),
    ]
    one, took = {"b": 1, "c": 1}, {"a": 1.0, "b": 1.0, "c": 1.0}
    assert straggler(out, "a", now=5.0, typical_s=2.0, running=one, took=took) == "t1"
    assert straggler(out, "a", now=1.5, typical_s=2.0, running=one, took=took) is None
    assert straggler(out[1:], "a", now=9.0, typical_s=1.0, running=one, took=took) is None  # t3 went to a already
    assert straggler(out[:1], "b", now=9.0, typical_s=1.0, running=one, took=took) is None  # its own batch
    assert straggler([Out("t1", "b", 0.0, frozenset({"b"}), copied=True)], "a", 9.0, 1.0, one, took) is None


def test_a_batch_waiting_behind_another_is_copied_first_the_newest() -> None:
    """b runs one batch at a time, holds three and answers slower than a: the newest of them would finish last,
    so idle a is sent a copy of it at once, however young; not when b is about as fast as a, nor when b has two
    processes for its two batches."""
    out = [Out(f"t{n}", "b", sent_at=float(n), tried=frozenset({"b"})) for n in range(3)]
    slow = {"a": 1.0, "b": 2.0}
    assert straggler(out, "a", now=3.0, typical_s=10.0, running={"b": 1}, took=slow) == "t2"
    assert straggler(out, "a", now=3.0, typical_s=10.0, running={"b": 1}, took={"a": 1.0, "b": 1.2}) is None
    assert straggler(out[:2], "a", now=3.0, typical_s=10.0, running={"b": 2}, took=slow) is None
