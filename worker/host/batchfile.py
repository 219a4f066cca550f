"""What a batch of trials looks like to the container: the probe's environment, which specs may
share a container, and the batch file the supervisor reads (everything per trial travels in it)."""

from __future__ import annotations

from collections.abc import Iterator

from gate.core.suite.batching import batch_key
from gate.core.suite.trial import TrialSpec
from worker.host.container import IN_DIR, LOWER, SCRATCH

WORK = "/work"  # where the supervisor lays out each trial's fresh copy of the tree
WRITABLE_ROOTS = (WORK, "/tmp", "/dev/shm", "/dev/mqueue")


def supervisor_env() -> dict[str, str]:
    """The container's environment, which the supervisor runs in: nothing of any run or trial, so a
    container can be started before it is bound to a batch."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # Otherwise libfaketime leaves /dev/shm/faketime_shm_* files that look like probe writes.
        "FAKETIME_DISABLE_SHM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def probe_env(spec: TrialSpec) -> dict[str, str]:
    """The probe's whole environment (nothing inherited from the image or the host)."""
    env = {
        **supervisor_env(),
        "TZ": spec.clock.zone,
        "PROBEGATE_TRIAL_INDEX": str(spec.trial_index),
        # The coordinator's seed for this trial: a probe seeds its randomness from it, so it replays exactly.
        "PROBEGATE_TRIAL_SEED": str(spec.seed),
        "PROBEGATE_PROPERTY": spec.property_id,
    }
    if spec.hash_seed is not None:
        # Held fixed by `gate flakes explain`; unset, each fresh interpreter draws its own.
        env["PYTHONHASHSEED"] = str(spec.hash_seed)
    if spec.pythonpath:
        # The suite's, never the image's: a derived image that sets PYTHONPATH is refused by the preflight.
        env["PYTHONPATH"] = ":".join(f"{WORK}/{entry}" for entry in spec.pythonpath)
    return env


def container_groups(specs: list[TrialSpec], per_trial: bool) -> Iterator[list[TrialSpec]]:
    """Runs of consecutive specs that form one batch (gate.core.suite.batching: the same key, so one container
    shape), each sent to one container as one batch file."""
    group: list[TrialSpec] = []
    for spec in specs:
        if group and (per_trial or batch_key(group[0]) != batch_key(spec)):
            yield group
            group = []
        group.append(spec)
    if group:
        yield group


def batch_file(pending: list[TrialSpec], *, timings: bool = False) -> dict:
    """The batch file: everything per trial (argv, env, fixture, canary) travels here, per batch.
    `timings`: the supervisor reports where each trial's time went (`steps_s`, for the benchmarks)."""
    trials = [
        {
            "id": str(position),
            "argv": list(spec.probe_argv),
            "deadline_s": spec.deadline_s,
            "output_cap_bytes": spec.limits.output_cap_bytes,
            "stdin": f"{IN_DIR}/stdin-{spec.fixture_digest}",
            "env": probe_env(spec),
            "canary": spec.canary,
        }
        for position, spec in enumerate(pending)
    ]
    return {
        "writable_roots": list(WRITABLE_ROOTS),
        # Overlay mode's places and sizes (worker/box/workdir.py), read at a container's first batch.
        "work": WORK,
        "work_mb": pending[0].limits.tmpfs_mb,
        "lower": LOWER,
        "scratch": SCRATCH,
        "frozen_epoch": pending[0].clock.frozen_at.timestamp(),
        # "fresh" or "warm" (worker/box/warm.py); the whole batch shares it (gate.core.suite.batching).
        "interpreter": pending[0].interpreter.value,
        # The explain knobs, shared by the whole batch like the clock: the warm parent is started with
        # them, a fresh probe spawned with ASLR as asked, and the clock mode is /etc/faketimerc's
        # (worker/host/warm.py writes it before the batch file).
        "hash_seed": pending[0].hash_seed,
        "aslr": pending[0].aslr,
        "clock_ticks": pending[0].clock_ticks,
        "faketime": pending[0].clock.faketimerc(),
        "timings": timings,
        "trials": trials,
    }
