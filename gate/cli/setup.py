"""`gate setup`: the sandbox image on this machine, from its definition in the installed package:
found present and as defined (about a second), else built from the Dockerfile where a registry
answers, or offline from the Debian mirror apt uses where none does; then the preflight proves the
frozen clock and the closed network in it. It says which it did.
"""

from __future__ import annotations

import argparse
import sys

from gate.cli.settings import settings_of
from gate.core.errors import RET_OK


def add_setup_parser(sub: argparse._SubParsersAction) -> None:
    setup = sub.add_parser("setup", help="find or build the sandbox image on this machine, and preflight it")
    setup.set_defaults(handler="gate.cli.setup:run_setup")
    setup.add_argument("--force", action="store_true", help="rebuild the image even when it is present")
    how = setup.add_mutually_exclusive_group()
    how.add_argument("--dockerfile", action="store_true", help="build from the Dockerfile (pulls its base image)")
    how.add_argument("--offline", action="store_true", help="build offline: debootstrap from the apt mirror (root)")
    setup.add_argument("--tag", help="build under this tag instead of the bundled one (to try a build beside it)")


def run_setup(args: argparse.Namespace) -> int:
    """Ensure the image, preflight it, print one line for each; exit 0, or the error's code."""
    from worker.host.engine import DEFAULT_IMAGE, docker_client
    from worker.host.imagesetup import How, ensure_sandbox_image
    from worker.host.preflight import preflight
    from worker.host.sandboxes.docker import DockerSandbox

    client = docker_client()
    how = How.DOCKERFILE if args.dockerfile else How.OFFLINE if args.offline else None
    tag = args.tag or DEFAULT_IMAGE
    found = ensure_sandbox_image(
        client, tag=tag, force=args.force, how=how, log=lambda line: print(f"gate setup: {line}", file=sys.stderr)
    )
    print(f"gate setup: sandbox image {found.line()}")
    result = preflight(DockerSandbox(client, image=tag, host=settings_of(args).host))
    copy = result.get("work_copy")
    print(f"gate setup: preflight passes: frozen clock, closed network; work copies: {copy}")
    print("next: gate doctor (checks the rest: git, Redis, keys, disk), then gate init in your repository")
    return RET_OK
