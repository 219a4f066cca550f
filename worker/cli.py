"""`gate-worker`: the worker side. `gate-worker preflight` checks this machine's Docker engine and
sandbox image the way every trial relies on them (frozen clock, no network) and exits 0 or 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gate.errors import RET_OK, GateError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise UsageError(message)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="gate-worker", description="Run probegate trials on this machine.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    pre = sub.add_parser("preflight", help="prove the frozen clock and the closed network on this engine")
    pre.add_argument("--image", help="sandbox image tag (default: the bundled sandbox image)")
    try:
        args = parser.parse_args(argv)
        from worker.preflight import preflight
        from worker.sandbox import DockerSandbox

        sandbox = DockerSandbox(image=args.image) if args.image else DockerSandbox()
        print(json.dumps(preflight(sandbox)))
        return RET_OK
    except GateError as exc:
        print(f"gate-worker: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
