"""`gate seal DIR` and `gate reseal DIR --seal FILE`: the seal of a fixture tree, printed or checked."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.errors import RET_OK


def add_seal_parsers(sub: argparse._SubParsersAction) -> None:
    """The `seal` and `reseal` subcommands."""
    seal = sub.add_parser("seal", help="print the seal of a fixture tree")
    seal.set_defaults(handler="gate.cli.seal:seal_command")
    seal.add_argument("dir", type=Path)
    seal.add_argument("--write", type=Path, metavar="FILE", help="also write the seal file")

    reseal = sub.add_parser("reseal", help="check the seal file against the tree; --write replaces it")
    reseal.set_defaults(handler="gate.cli.seal:reseal_command")
    reseal.add_argument("dir", type=Path, help="the fixture tree")
    reseal.add_argument("--seal", type=Path, required=True, metavar="FILE", help="the seal file to check")
    reseal.add_argument("--write", action="store_true", help="replace a stale or missing seal file")


def seal_command(args: argparse.Namespace) -> int:
    """Print the tree's seal digest; with --write, also write the seal file (refused inside the tree)."""
    from gate.io.artifacts import check_writable
    from gate.io.fixtures import seal_tree, write_seal_file
    from gate.io.reseal import check_seal_outside

    if args.write:
        check_seal_outside(args.write, args.dir, "--write")  # as `gate reseal` refuses it
        check_writable(args.write, "--write")
    seal = seal_tree(args.dir)
    if args.write:
        write_seal_file(args.write, seal)
    print(seal.digest)
    return RET_OK


def reseal_command(args: argparse.Namespace) -> int:
    """Check the seal file against the tree (gate.io.reseal); --write replaces a stale one."""
    from gate.io.reseal import run_reseal

    # stdout as it is now: run_reseal's default is the one at its import (a test's capture, in process)
    return run_reseal(args.dir, args.seal, write=args.write)
