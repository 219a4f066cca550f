"""Deliberately flaky probes, one per source of nondeterminism `gate flakes explain` controls, plus
one moved by two sources, one by entropy the sandbox does not control, and one that never flickers.
PROBEGATE_PROPERTY picks which; each prints `ok` or `not ok`, about half the time each when its
source varies."""

import os
import sys

LOADED_AT_START = set(sys.modules)  # before this probe imports anything of its own

import random  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402


def seed_bit() -> bool:
    return random.Random(int(os.environ["PROBEGATE_TRIAL_SEED"])).random() < 0.5


def hash_bit() -> bool:
    return next(iter({"apple", "pear"})) == "apple"  # set order follows str hashing (PYTHONHASHSEED)


def address_bit() -> bool:
    return (id(object()) >> 16) % 2 == 0  # where the heap was mapped: ASLR moves it (in steps of 16 KiB here)


def deadline_bit() -> bool:
    # The deadline is three times the work's own CPU time (getrusage: a clock libfaketime leaves alone), so
    # it holds on a slow machine and misses only when the trial gets a small share of a CPU.
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    total = 0
    for i in range(300_000):
        total += i * i
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    return time.monotonic() - started < 3 * spent + 0.02


def clock_bit() -> bool:
    return int(time.time() * 1000) % 2 == 0  # the wall clock's milliseconds: zero while it stands still


def warm_bit() -> bool:
    return "csv" in LOADED_AT_START  # a warm parent imported it before this probe started


PROBES = {
    "flaky_seed": seed_bit,
    "flaky_hash_order": hash_bit,
    "flaky_addresses": address_bit,
    "flaky_deadline": deadline_bit,
    "flaky_wall_clock": clock_bit,
    "flaky_warm_state": warm_bit,
    "flaky_seed_and_hash": lambda: seed_bit() != hash_bit(),
    "flaky_entropy": lambda: os.urandom(1)[0] % 2 == 0,
    "steady": lambda: True,
}

print("ok" if PROBES[os.environ["PROBEGATE_PROPERTY"]]() else "not ok")
