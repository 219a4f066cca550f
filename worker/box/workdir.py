"""The trial's work dir in the mode chosen once per container, before its first trial:

- `copy`: the tree is laid out afresh in the (empty) work dir for every trial, every file of it
  read back to find the trial's writes, and the dir wiped after (cost grows with the tree).
- `overlay`: each trial's work dir is a fresh overlay over a read-only lower layer whose upper dir
  alone says what the trial wrote (worker/box/overlay.py). The lower is the tree itself where the
  host showed it as a read-only mount owned by the sandbox's uid (nothing read or copied per
  container); else the tree is read once and laid out once as the lower.

Overlay mode is asked for by the host (the supervisor's third argument), and only where the host
gave the container a seccomp profile that lets the supervisor unshare and mount. Where it cannot
work the container copies, and `note` says why; a trial never runs twice to try another mode.
The other writable places (/tmp, /dev/shm, /dev/mqueue) are snapshotted and wiped in both modes.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping

try:  # inside the sandbox: siblings in the same read-only mount
    import overlay
    from fsdiff import Template, diff, snapshot, wipe
    from steps import Steps
except ImportError:  # imported on the host as worker.box.workdir
    from worker.box import overlay
    from worker.box.fsdiff import Template, diff, snapshot, wipe
    from worker.box.steps import Steps

OVERLAY, COPY = "overlay", "copy"
MIB = 1 << 20


class WorkDir:
    """The work dir of every trial of one container. Call `enter` at the supervisor's start (before
    it turns undumpable), `bind` at its first batch, then per trial `lay_out`, `changes`, `reset`.
    `steps` gets the once-per-container costs: choosing the mode ("setup", of which "lower" and "dry") and
    reading the tree ("tree")."""

    def __init__(self, wanted: str, steps: Steps | None = None) -> None:
        self.wanted = wanted
        self.mode = COPY
        self.note = ""  # why this container copies although overlay was asked for
        self.steps = steps or Steps()
        self._entered = False
        self._bound = False
        self._places: dict[str, str] = {}
        self._upper_mb = 0
        self._lower_sigs: Mapping[str, str] = {}
        self._layer: overlay.Layer | None = None
        self._src = "/src"
        self._tree: Template | None = None
        self._unreadable: OSError | None = None

    def enter(self) -> None:
        """The first half of choosing overlay mode: our own user and mount namespace, and the filter
        that refuses any to the probes. Must run before harden(): once undumpable, /proc/self/uid_map
        is no longer ours to write. Raises only when the filter could not be installed."""
        if self.wanted != OVERLAY:
            return
        reason = overlay.enter()
        self._entered = reason is None
        self.note = reason or ""

    def bind(self, src: str, batch: dict) -> None:
        """The second half, once, at the container's first batch (its tree is bound by then): use the
        tree in place as the lower where overlay.in_place allows, else read it, lay out a lower and
        prove an overlay by a dry run; else copy mode, saying why. A tree that cannot be read is kept
        as the error `lay_out` raises (the patch's doing, reported by its first trial)."""
        if self._bound:
            return
        self._bound = True
        self._src = src
        self.steps.put("setup", 0.0)  # unless overlay mode is tried below, choosing costs nothing
        if not self._entered:
            return
        started = self.steps.start()
        work, work_mb = batch.get("work", "/work"), int(batch["work_mb"])
        self._places = {"lower": batch["lower"], "scratch": batch["scratch"], "work": work}
        if overlay.in_place(src, bool(batch.get("tree_in_place"))):
            # No tree to read and no lower to lay out: what the tree holds is read as trials touch it.
            # Its size was checked by the host, which refuses a tree the work dir could not hold.
            reason, before = overlay.setup_in_place(
                src, scratch=batch["scratch"], work=work, upper_mb=work_mb, steps=self.steps
            )
            if reason is None:
                self.steps.stop("setup", started)
                self._places["lower"] = src
                self.mode, self._upper_mb, self._lower_sigs = OVERLAY, work_mb, before
                return
            self.note = f"the tree could not be the lower in place ({reason})"
        template = self._template()
        if template is None:
            return
        tree_mb = -(-template.bytes // MIB)
        if tree_mb > work_mb:
            # Copy mode will find the same (the tree does not fit): the patch's fault either way.
            self.note = f"the tree ({tree_mb} MiB) does not fit the work dir ({work_mb} MiB)"
            return
        # The lower holds the tree once (a page of slack for tmpfs's rounding); each trial's upper
        # may hold as much as a copy-mode work dir, so a trial's room to write never shrinks.
        reason = overlay.setup(template, **self._places, lower_mb=tree_mb + 1, upper_mb=work_mb, steps=self.steps)
        self.steps.stop("setup", started)
        if reason is not None:
            self.note = reason
            return
        self.mode, self._upper_mb, self.note = OVERLAY, work_mb, ""
        self._lower_sigs = template.signatures(work)

    def lay_out(self, work: str) -> Mapping[str, str]:
        """Give one trial its fresh work dir; what fsdiff.snapshot would say of it (its `before`).
        OSError when the tree could not be read (copy mode)."""
        if self.mode == COPY:
            template = self._template()
            if template is None:
                raise self._unreadable
            return template.lay_out(work)
        self._layer = overlay.prepare(self._places["lower"], self._places["scratch"], work, size_mb=self._upper_mb)
        return self._lower_sigs

    def _template(self) -> Template | None:
        """The tree read once per container (None, keeping the error, when it cannot be read)."""
        if self._tree is None and self._unreadable is None:
            started = self.steps.start()
            try:
                self._tree = Template(self._src)
            except OSError as exc:
                self._unreadable = exc
            self.steps.stop("tree", started)
        return self._tree

    def changes(self, work_before: dict[str, str], others_before: dict[str, str], roots: list[str]) -> list[dict]:
        """What the trial created, modified or deleted in every writable root, as fsdiff.diff says it;
        `work_before` from `lay_out`, `others_before` a snapshot of the other roots. Every process of
        the trial must be dead (nothing may write while this reads)."""
        if self._layer is None:
            return diff({**work_before, **others_before}, snapshot(roots))
        # Never merged with work_before: that would cost a pass over the tree per trial.
        others = [root for root in roots if root != self._layer.work]
        found = overlay.changes(self._layer, work_before) + diff(others_before, snapshot(others))
        return sorted(found, key=lambda change: change["path"])

    def reset(self, roots: list[str]) -> None:
        """Empty the writable places for the next trial: discard the overlay (or wipe the copy) and
        wipe the rest. OSError when a place could not be reset (the container must not go on)."""
        layer, self._layer = self._layer, None
        if layer is not None:
            overlay.discard(layer)
        for root in roots:
            if layer is None or root != layer.work:
                wipe(root)
