"""A probe whose cost is its import: sums a numpy array of the request's length."""

import json
import sys

import numpy as np

request = json.load(sys.stdin)
print(json.dumps({"sum": float(np.arange(request["n"], dtype=np.float64).sum())}))
