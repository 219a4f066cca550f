"""Probe entry of the paired suite (paired.toml; an oracle file: a patch may not edit it). Reads one
tool query on stdin, routes it with the product code and the gate's trial seed, prints one JSON result.
The same seed reaches the base tree's trial and the patched tree's trial of one index."""

import json
import os
import sys

from invoicing import api


def main() -> int:
    request = json.load(sys.stdin)
    print(json.dumps(api.route_ticket(request, seed=int(os.environ["PROBEGATE_TRIAL_SEED"])), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
