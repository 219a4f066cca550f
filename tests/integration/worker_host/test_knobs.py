"""The explain knobs in the real sandbox (a fixed PYTHONHASHSEED, ASLR off, a ticking clock), with fresh and
warm interpreters. Each test opens its run, so its batches share one warm container, as a run's do."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gate.core.suite.plan import trial_seed
from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import Observation, TrialSpec
from worker.box.warmclient import PARENT_TRIALS
from worker.host.sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.integration

FROZEN_EPOCH = 1772323200.0  # 2026-03-01T00:00:00Z, the make_trial fixture's instant
PROBE = 'print(hash("abc"), id(object()))\n'  # a str hash and the address of a fresh allocation
CLOCK = """
    import time
    first = time.time()
    started = time.monotonic()
    while time.monotonic() - started < 0.05:
        pass
    print(repr(first), repr(time.time()))
"""
RunBatch = Callable[[list[TrialSpec], Inputs], list[Observation]]


@pytest.fixture
def mode(request: pytest.FixtureRequest) -> str:
    """`fresh` or `warm` interpreters over the default work copy, or `copy` (fresh, copied work dirs)."""
    return getattr(request, "param", "fresh")


@pytest.fixture
def interpreter(mode: str) -> str:
    return "warm" if mode == "warm" else "fresh"


@pytest.fixture
def work_copy(mode: str) -> str | None:
    return "copy" if mode == "copy" else None


@pytest.fixture
def opened(sandbox: DockerSandbox, run_id: str, run_batch: RunBatch, leftovers) -> Iterator[RunBatch]:
    """run_batch within the open run, which is closed after the test and leaves no container."""
    sandbox.open(run_id)
    try:
        yield run_batch
    finally:
        sandbox.close(run_id)
    assert leftovers() == [], "a container of this test's run remains"


def trials(first: TrialSpec, count: int, start: int = 0, **knobs: object) -> list[TrialSpec]:
    """`count` trials of `first`'s property from index `start`, each with its planner seed, with `knobs`."""
    return [
        first.model_copy(update={"trial_index": i, "seed": trial_seed(first.run_id, first.property_id, i), **knobs})
        for i in range(start, start + count)
    ]


def printed(obs: Observation) -> list[int]:
    """PROBE's line: hash("abc") and id(object())."""
    assert obs.fault is None and obs.exit_code == 0, (obs.fault, obs.stderr.data[-500:])
    return [int(word) for word in obs.stdout.data.split()]


def clock_reads(obs: Observation) -> tuple[float, float]:
    """CLOCK's line: its two reads of time.time()."""
    assert obs.fault is None and obs.exit_code == 0, (obs.fault, obs.stderr.data[-500:])
    first, second = obs.stdout.data.split()
    return float(first), float(second)


@pytest.mark.parametrize("mode", ["fresh", "warm"], indirect=True)
def test_a_set_hash_seed_fixes_str_hashes_and_an_unset_one_does_not(opened, make_trial, mode):
    """Trials given the same hash_seed print the same hash("abc"), a warm parent restarted with it too,
    another seed prints another, and fresh trials without one print a different hash each."""
    first, inputs = make_trial(PROBE)
    specs = trials(first, 2, hash_seed=1234) + trials(first, 1, 2, hash_seed=5678) + trials(first, 1, 3, hash_seed=1234)
    specs += trials(first, 3, 4)
    observed = opened(specs, inputs)
    hashes = [printed(obs)[0] for obs in observed]
    assert hashes[0] == hashes[1] == hashes[3] != hashes[2]
    assert [obs.hash_seed for obs in observed[:4]] == [1234, 1234, 5678, 1234]
    if mode == "fresh":
        assert len(set(hashes[4:])) == 3 and hashes[0] not in hashes[4:]
        assert [obs.hash_seed for obs in observed[4:]] == [None] * 3
    else:  # the parent's own random seed, shared by its trials
        assert observed[4].hash_seed not in (None, 1234, 5678) and len({obs.hash_seed for obs in observed[4:]}) == 1


@pytest.mark.parametrize("mode", ["fresh", "copy"], indirect=True)
def test_aslr_off_gives_fresh_trials_the_same_addresses(opened, make_trial):
    """With aslr off, six trials allocate their first object at one address; with it on, at six others
    (randomised mmap bases differ in about 28 bits, so two alike by chance are out of the question)."""
    first, inputs = make_trial(PROBE)
    observed = opened(trials(first, 6, aslr=False) + trials(first, 6, 6), inputs)
    fixed = {printed(obs)[1] for obs in observed[:6]}
    varied = {printed(obs)[1] for obs in observed[6:]}
    assert len(fixed) == 1 and len(varied) == 6 and not fixed & varied


@pytest.mark.parametrize("mode", ["warm"], indirect=True)
def test_aslr_off_gives_warm_children_of_every_parent_the_same_addresses(opened, make_trial):
    """Warm children share their parent's layout: with aslr off every child of two parents allocates at
    one address; with it on the second parent's children allocate elsewhere than the first's."""
    first, inputs = make_trial(PROBE)
    count = PARENT_TRIALS + 1  # the last trial of each kind runs in a second parent
    observed = opened(trials(first, count, aslr=False) + trials(first, count, count), inputs)
    fixed, varied = observed[:count], observed[count:]
    assert len({obs.hash_seed for obs in fixed}) == 2  # two parents, each with a random seed
    assert len({printed(obs)[1] for obs in fixed}) == 1
    by_parent: dict[int | None, set[int]] = {}
    for obs in varied:
        by_parent.setdefault(obs.hash_seed, set()).add(printed(obs)[1])
    assert len(by_parent) == 2
    one, other = by_parent.values()
    assert not one & other


@pytest.mark.parametrize("mode", ["fresh", "warm"], indirect=True)
def test_a_ticking_clock_starts_at_the_frozen_instant_and_moves(opened, make_trial, leftovers):
    """A ticking batch reads the frozen instant, then 50 ms later a later one; frozen batches before and after
    it in the same container read the instant both times."""
    first, inputs = make_trial(CLOCK)
    specs = trials(first, 2) + trials(first, 2, 2, clock_ticks=True) + trials(first, 2, 4)
    observed = opened(specs, inputs)
    assert len(leftovers()) == 1  # one warm container served all three batches
    for obs in observed[:2] + observed[4:]:
        assert clock_reads(obs) == (FROZEN_EPOCH, FROZEN_EPOCH)
    for obs in observed[2:4]:
        start, later = clock_reads(obs)
        assert FROZEN_EPOCH <= start < later < FROZEN_EPOCH + 5 and later - start >= 0.04
