"""What `gate run` refuses before any container starts, and what it reads to get there: every output's
place (card, evidence store, books, proposals, reports, journal) outside the patched tree, the tree itself read
and sized, a paired property's base tree, the signing key and the image the trials run in.

A refusal here is a configuration error: nothing has run, no card is written, no credit is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import UsageError
from gate.core.suite.suite import ImageSource, Suite
from gate.io.bookstore import BooksStore
from gate.io.cardsig import run_signing_key
from gate.io.evidence import check_store, evidence_dir
from gate.io.journal import check_journal_place, journal_path
from gate.io.keys import SigningKey
from gate.io.patchedtree import PatchedTree, check_fits, read_patched_tree
from gate.io.proposals import check_proposal_paths
from gate.io.snapshot import check_outside_tree
from gate.io.treeselect import TreeSelection, tree_selection
from gate.run.oracle import Oracle
from gate.run.pairedbase import paired_base
from gate.run.request import ImageFactory, RunRequest, card_of


@dataclass(frozen=True)
class Admitted:
    """What the run was admitted with: the tree's selection and contents, the base tree (paired
    properties), the key that signs the card, the evidence store and the image trials run in."""

    selection: TreeSelection
    tree: PatchedTree
    base: PatchedTree | None
    signer: SigningKey | None
    store: Path
    image: str | None


def admit(
    request: RunRequest, oracle: Oracle, suite: Suite, books: BooksStore, image_factory: ImageFactory | None
) -> Admitted:
    """Check every output's place and read the trees, key and image, refusing before any container."""
    card_path = card_of(request)
    selection = tree_selection(suite, request.workdir, suite_file=request.suite)
    check_outside_tree(card_path, request.workdir, selection, field="--card")
    # The books and their lock change after the run, so inside the tree they must be outputs.
    for written in books.files:
        check_outside_tree(written, request.workdir, selection, field="--ledger")
    # The evidence store beside the card is an output too: inside the tree it must be left out like the card.
    store = evidence_dir(card_path)
    check_outside_tree(store, request.workdir, selection, field="--card")
    check_store(store, "--card")
    check_proposal_paths(card_path, request.workdir, selection)
    for flag, path in request.reports.outputs().items():
        check_outside_tree(path, request.workdir, selection, field=flag)
    # The journal is read back by a resume: anywhere in the patch's repository, the patch could have written it.
    check_journal_place(journal_path(card_path, request.state_dir), request.workdir)
    # Read and sized before any container starts: a tree the sandbox cannot hold is refused in one line
    # (a configuration error: nothing runs, no card, no credit), not found out in every container.
    tree = read_patched_tree(request.workdir, selection)
    check_fits(tree, suite.config.limits, where=request.workdir)
    base = paired_base(suite, oracle, selection, shown=request.suite)
    signer = None
    if request.sign_key is not None:  # read now: a key the sandbox could reach is refused before any trial
        signer = run_signing_key(request.sign_key, request.workdir, tree, selection, card=card_path)
    image = run_image(request.image, oracle.image, image_factory)
    return Admitted(selection=selection, tree=tree, base=base, signer=signer, store=store, image=image)


def run_image(given: str | None, source: ImageSource | None, image_factory: ImageFactory | None) -> str | None:
    """The image trials run in: the suite's project image (built from the base's definition), else --image
    (`given`)."""
    if source is None:
        return given
    if given:
        raise UsageError(f"the suite names its image ([suite.image] {source.label}); drop --image", field="--image")
    if image_factory is None:
        raise UsageError("the suite names a project image, but this command cannot build images")
    return image_factory(source)
