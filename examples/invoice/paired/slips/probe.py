"""Probe entry (an oracle file: a patch may not edit it). Reads one request on stdin, calls the
product code, prints one JSON result. The gate judges the output and the files written."""

import json
import os
import sys
import time

from invoicing import api


def main() -> int:
    request = json.load(sys.stdin)
    if request["kind"] == "invoice":
        result = api.render_invoice(request, now=time.time())
    elif request["kind"] == "tool_query":
        # The gate's seed for this trial: each trial is a fresh draw, and any one of them replays exactly.
        result = api.choose_tool(request, seed=int(os.environ["PROBEGATE_TRIAL_SEED"]))
    else:
        print(f"unknown request kind {request['kind']!r}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
