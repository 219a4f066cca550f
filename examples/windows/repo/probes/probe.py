"""Probe entry (an oracle file: a patch may not edit it). Reads one request on stdin, calls
windowcal (found through [suite] pythonpath = ["src"]) and prints one JSON result. The gate
judges the output and the files written, on the coordinator."""

import json
import os
import random
import sys
from datetime import datetime

import windowcal
from windowcal import retry


def main() -> int:
    request = json.load(sys.stdin)
    kind = request["kind"]
    try:
        if kind == "load":
            result = {"config": windowcal.load(request["schedule"])}
        elif kind == "windows":
            config = windowcal.load(request["schedule"])
            # The gate freezes the clock: "now" is the instant in fixtures/clock.json.
            now = datetime.now().astimezone()
            result = {"windows": windowcal.next_windows(config, now, count=request["count"])}
        elif kind == "retry":
            # The gate's seed for this trial: each trial a fresh draw, any one of them replayed exactly.
            rng = random.Random(int(os.environ["PROBEGATE_TRIAL_SEED"]))
            result = {"delays": retry.delays(request["attempts"], request["base_s"], request["cap_s"], rng)}
        else:
            print(f"unknown request kind {kind!r}", file=sys.stderr)
            return 2
    except windowcal.ConfigError as exc:
        result = {"error": str(exc), "field": exc.field}
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
