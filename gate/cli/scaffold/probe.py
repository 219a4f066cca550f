"""The probe: `gate run` runs it once per trial inside a sandbox (no network, a frozen clock, a fresh
copy of this tree, the tree's root as its working folder). It reads one fixture (JSON) on stdin,
calls the code under test, and prints one JSON result on stdout; checks.py judges that result.

probe.py is an oracle file: with --base it is read from the base revision, so a patch cannot change
how it is judged. Keep it small: the checks decide, the probe only calls and reports.

Each trial gets a seed from the gate, PROBEGATE_TRIAL_SEED: seed every source of randomness from it
(below, Python's `random`), so each trial is a fresh draw and any one of them replays exactly. To run
the probe by hand: PROBEGATE_TRIAL_SEED=1 python3 probe.py < fixtures/requests/hello.json
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import unicodedata
from datetime import UTC, datetime


def call_your_code(text: str) -> str:
    """A stand-in for your project's code, so the suite runs as written.

    Replace this with a call into your code, for example:

        from yourpackage.text import slugify   # the tree's root is importable; for src/ set
        return slugify(text)                   # pythonpath = ["src"] in gate.toml

    then make the fixtures and checks describe what your code must do, and reseal the fixtures.
    """
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")


def main() -> int:
    # The gate's seed for this trial (never one of the probe's own): your code's draws follow from it.
    random.seed(int(os.environ["PROBEGATE_TRIAL_SEED"]))
    request = json.load(sys.stdin)
    answer = call_your_code(request["input"])
    # datetime.now() is the frozen instant of fixtures/clock.json: the same output on every trial.
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(json.dumps({"output": answer, "at": at}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
