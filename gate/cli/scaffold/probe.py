"""The probe: `gate run` runs it once per trial inside a sandbox (no network, a frozen clock, a fresh
copy of this tree, the tree's root as its working folder). It reads one fixture (JSON) on stdin,
calls the code under test, and prints one JSON result on stdout; checks.py judges that result.

probe.py is an oracle file: with --base it is read from the base revision, so a patch cannot change
how it is judged. Keep it small: the checks decide, the probe only calls and reports.
"""

from __future__ import annotations

import json
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
    request = json.load(sys.stdin)
    answer = call_your_code(request["input"])
    # datetime.now() is the frozen instant of fixtures/clock.json: the same output on every trial.
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(json.dumps({"output": answer, "at": at}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
