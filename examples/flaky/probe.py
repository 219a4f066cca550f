"""Deliberately flaky probes, one per source of nondeterminism `gate flakes explain` controls, plus
one moved by two sources, one by entropy the sandbox does not control, and one that never flickers.
PROBEGATE_PROPERTY picks which; each prints `ok` or `not ok`, about half the time each when its
source varies."""

import os
import sys

LOADED_AT_START = set(sys.modules)  # before this probe imports anything of its own

import random  # noqa: E402
import time  # noqa: E402


def seed_bit() -> bool:
    return random.Random(int(os.environ["PROBEGATE_TRIAL_SEED"])).random() < 0.5


def hash_bit() -> bool:
    return next(iter({"apple", "pear"})) == "apple"  # set order follows str hashing (PYTHONHASHSEED)


def address_bit() -> bool:
    return (id(object) >> 12) % 2 == 0  # where the interpreter was loaded: ASLR moves it page by page


def deadline_bit() -> bool:
    started = time.monotonic()
    total = 0
    for i in range(400_000):  # a few tens of milliseconds of CPU
        total += i * i
    return time.monotonic() - started < 0.25


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
