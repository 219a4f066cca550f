"""The trial's work dir in the mode chosen once per container, before its first trial:

- `copy`: the tree is laid out afresh in the (empty) work dir for every trial, every file of it
  read back to find the trial's writes, and the dir wiped after (cost grows with the tree).
- `overlay`: the tree is laid out once as a read-only lower layer, and each trial's work dir is a
  fresh overlay over it whose upper dir alone says what the trial wrote (worker/box/overlay.py).

Overlay mode is asked for by the host (the supervisor's third argument), and only where the host
gave the container a seccomp profile that lets the supervisor unshare and mount. Where it cannot
work the container copies, and `note` says why; a trial never runs twice to try another mode.
The other writable places (/tmp, /dev/shm, /dev/mqueue) are snapshotted and wiped in both modes.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import time

try:  # inside the sandbox: siblings in the same read-only mount
    import overlay
    from fsdiff import Template, diff, snapshot, wipe
except ImportError:  # imported on the host as worker.box.workdir
    from worker.box import overlay
    from worker.box.fsdiff import Template, diff, snapshot, wipe

OVERLAY, COPY = "overlay", "copy"
MIB = 1 << 20


class WorkDir:
    """The work dir of every trial of one container. Call `enter` at the supervisor's start (before
    it turns undumpable), `bind` at its first batch, then per trial `lay_out`, `changes`, `reset`."""

    def __init__(self, wanted: str) -> None:
        self.wanted = wanted
        self.mode = COPY
        self.note = ""  # why this container copies although overlay was asked for
        self.setup_s = 0.0  # what binding cost, once per container (laying out the lower, the dry run)
        self.setup_steps: dict[str, float] = {}  # its split: "lower" and "dry" (for the benchmarks)
        self._entered = False
        self._bound = False
        self._places: dict[str, str] = {}
        self._upper_mb = 0
        self._lower_sigs: dict[str, str] = {}
        self._layer: overlay.Layer | None = None

    def enter(self) -> None:
        """The first half of choosing overlay mode: our own user and mount namespace, and the filter
        that refuses any to the probes. Must run before harden(): once undumpable, /proc/self/uid_map
        is no longer ours to write. Raises only when the filter could not be installed."""
        if self.wanted != OVERLAY:
            return
        reason = overlay.enter()
        self._entered = reason is None
        self.note = reason or ""

    def bind(self, template: Template, batch: dict) -> None:
        """The second half, once, at the container's first batch (its tree is bound by then): lay out
        the lower and prove an overlay by a dry run; else copy mode, saying why."""
        if self._bound:
            return
        self._bound = True
        if not self._entered:
            return
        started = time.monotonic()
        work, work_mb = batch.get("work", "/work"), int(batch["work_mb"])
        tree_mb = -(-template.bytes // MIB)
        if tree_mb > work_mb:
            # Copy mode will find the same (the tree does not fit): the patch's fault either way.
            self.note = f"the tree ({tree_mb} MiB) does not fit the work dir ({work_mb} MiB)"
            return
        self._places = {"lower": batch["lower"], "scratch": batch["scratch"], "work": work}
        # The lower holds the tree once (a page of slack for tmpfs's rounding); each trial's upper
        # may hold as much as a copy-mode work dir, so a trial's room to write never shrinks.
        reason = overlay.setup(
            template, **self._places, lower_mb=tree_mb + 1, upper_mb=work_mb, timings=self.setup_steps
        )
        self.setup_s = time.monotonic() - started
        if reason is not None:
            self.note = reason
            return
        self.mode, self._upper_mb = OVERLAY, work_mb
        self._lower_sigs = template.signatures(work)

    def lay_out(self, template: Template, work: str) -> dict[str, str]:
        """Give one trial its fresh work dir; what fsdiff.snapshot would say of it (its `before`)."""
        if self.mode == COPY:
            return template.lay_out(work)
        self._layer = overlay.prepare(self._places["lower"], self._places["scratch"], work, size_mb=self._upper_mb)
        return self._lower_sigs

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
