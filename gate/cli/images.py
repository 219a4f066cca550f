"""Project images from the command line: `gate image build`, and the image factory `gate run`
and `gate baseline` use to find or build the suite's image before any trial (Docker is picked
here, in the composition root, like the executor)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.errors import RET_OK, ImageError, UsageError

if TYPE_CHECKING:
    from gate.core.suite.suite import ImageSource


def add_image_arguments(sub: argparse._SubParsersAction) -> None:
    """`gate image build [--suite FILE] [--base REV] [--image BASE_TAG]`."""
    image = sub.add_parser("image", help="build the suite's project image")
    image.set_defaults(handler="gate.cli.images:run_image")
    verbs = image.add_subparsers(dest="image_command", required=True, metavar="build")
    build = verbs.add_parser("build", help="find or build the image [suite.image] defines; print its ID")
    build.add_argument("--suite", type=Path, default=Path("gate.toml"), help="suite file (default ./gate.toml)")
    build.add_argument("--base", metavar="GIT_REV", help="read the image definition from this revision")
    build.add_argument("--from-image", metavar="TAG", help="the probegate base image (default: the bundled one)")


def run_image(args: argparse.Namespace) -> int:
    """Build (or find) the project image the suite names and print its ID on stdout."""
    from gate.io.gitbase import BaseCheckout
    from gate.io.suite import load_suite

    with BaseCheckout(args.suite.parent, args.base) if args.base else contextlib.nullcontext() as base:
        suite_path = base.need(args.suite, "the suite file") if base else args.suite
        suite = load_suite(suite_path, repository=base.root if base else None)
        source = suite.image_source()
        if source is None:
            raise UsageError("the suite names no project image; add [suite.image]", file=str(args.suite))
        print(build_for_run(source, base=args.from_image))
    return RET_OK


def build_for_run(source: ImageSource, *, base: str | None = None, emit: Callable[[str], None] | None = None) -> str:
    """The image ID for `source`, found or built, and proven by the preflight (a refusal is ImageError)."""
    from worker.host.engine import DEFAULT_IMAGE, docker_client
    from worker.host.images import project_image
    from worker.host.preflight import prove_image

    client = docker_client()
    say = emit or (lambda line: print(f"gate: {line}", file=sys.stderr))
    image_id = project_image(client, source, base=base or DEFAULT_IMAGE, emit=say)
    if image_id not in _PROVEN:
        try:
            prove_image(client, image_id)
        except ImageError as exc:
            raise ImageError(exc.message, file=source.label) from None
        _PROVEN.add(image_id)
    return image_id


_PROVEN: set[str] = set()  # images this process has preflighted (one build, many runs in tests)
