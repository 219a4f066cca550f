"""The base tree a paired property's other side runs on: the base revision's version of the work folder
(from --base's git objects, as the oracle and the flicker reruns get it), read and sized before any
container starts, and snapshotted beside the patched tree with the base's probe entry laid over both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from gate.core.errors import UsageError
from gate.core.suite.suite import Suite
from gate.core.verdicts.paired import PairedRule
from gate.io.gitbase import base_tree
from gate.io.patchedtree import PatchedTree, check_fits
from gate.io.snapshot import LocalInputs
from gate.io.treeselect import TreeSelection
from gate.run.oracle import Oracle


def paired_base(suite: Suite, oracle: Oracle, selection: TreeSelection, *, shown: Path) -> PatchedTree | None:
    """The base tree paired properties run on, read and sized before any container (None: none is paired);
    a paired property in a run without --base is refused in one line."""
    paired = [p.id for p in suite.properties if isinstance(p.rule(), PairedRule)]
    if not paired:
        return None
    if oracle.base_workdir is None:
        raise UsageError(
            f'property {paired[0]} uses rule = "paired", which runs the base tree too: pass --base REV',
            file=str(shown),
            field="--base",
        )
    tree = base_tree(oracle.base_workdir, selection)
    check_fits(tree, suite.config.limits, where=oracle.base_workdir)
    return tree


def base_inputs(
    oracle: Oracle, base: PatchedTree | None, fixtures: Mapping[str, bytes], suite: Suite
) -> contextlib.AbstractContextManager[LocalInputs | None]:
    """The base tree's snapshot (with the base's probe entry, as the patch's gets), or nothing."""
    if base is None or oracle.base_workdir is None:
        return contextlib.nullcontext()
    return LocalInputs(oracle.base_workdir, fixtures, tree=base, overrides=oracle.overrides, limits=suite.config.limits)
