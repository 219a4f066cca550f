"""What the card says about cross-checks: the share, how many trials ran on a second worker, every
disagreement naming both workers, the tie-breaks (quarantined workers, nondeterministic trials), the
statistical hit-rate outliers and replays, and the caught workers whose results were discarded. Pure
data and the lines reports print of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from gate.core.trust.crosscheck import Settled, Settlement, WorkerDisagreement
from gate.core.trust.hitrate import HitRateOutlier

_MODEL = ConfigDict(frozen=True, extra="forbid")


class TrialRef(BaseModel):
    model_config = _MODEL
    property_id: str
    trial_index: int = Field(ge=0)


class CrossCheckSummary(BaseModel):
    """The run's cross-checks. `share` is the configured share; `checked` the trials that ran on a
    second worker; `note` why fewer (or none) did, e.g. a local pool or a one-worker fleet."""

    model_config = _MODEL
    share: float = Field(ge=0, le=1)
    seed: str = ""  # drawn by the coordinator, shown only after the run: it makes the choice auditable
    chosen: int = Field(0, ge=0)
    checked: int = Field(0, ge=0)
    note: str = ""
    disagreements: tuple[WorkerDisagreement, ...] = ()
    settlements: tuple[Settlement, ...] = ()
    quarantined: tuple[str, ...] = ()
    nondeterministic: tuple[TrialRef, ...] = ()
    outliers: tuple[HitRateOutlier, ...] = ()
    # Statistical replays (`gate.core.trust.replay`): trials chosen, how many of them the margin rule
    # added, how many ran on a second worker; disputes no tie-break settled (their rows cannot pass).
    replays_chosen: int = Field(0, ge=0)
    replays_for_margin: int = Field(0, ge=0)
    # The suite's `replay_escape`: 0, a lie that turns a row is always replayed; above, at most this often not.
    replay_escape: float = Field(0.0, ge=0, lt=1)
    replays_checked: int = Field(0, ge=0)
    unresolved: tuple[TrialRef, ...] = ()
    # Caught workers whose every counted result was discarded and run again elsewhere (`reran` trials).
    discarded: tuple[str, ...] = ()
    reran: int = Field(0, ge=0)
    # Owned workers (the registry says so), whose results counted with no second run; and who ran how many
    # second runs (cross-checks, replays, tie-breaks, reruns): who verified what.
    trusted: tuple[str, ...] = ()
    verified_by: dict[str, int] = Field(default_factory=dict)


def summarize(
    *,
    share: float,
    seed: str,
    chosen: int,
    checked: int,
    note: str = "",
    disagreements: Sequence[WorkerDisagreement] = (),
    settlements: Sequence[Settlement] = (),
    outliers: Sequence[HitRateOutlier] = (),
    replays_chosen: int = 0,
    replays_for_margin: int = 0,
    replay_escape: float = 0.0,
    replays_checked: int = 0,
    unresolved: Sequence[tuple[str, int]] = (),
    discarded: Sequence[str] = (),
    reran: int = 0,
    trusted: Iterable[str] = (),
    verified_by: Mapping[str, int] | None = None,
) -> CrossCheckSummary:
    """The summary, with the quarantined workers and nondeterministic trials drawn from the settlements."""
    quarantined = sorted({s.quarantined for s in settlements if s.settled is Settled.QUARANTINE and s.quarantined})
    nondeterministic = sorted(
        {(s.property_id, s.trial_index) for s in settlements if s.settled is Settled.NONDETERMINISTIC}
    )
    return CrossCheckSummary(
        share=share,
        seed=seed,
        chosen=chosen,
        checked=checked,
        note=note,
        disagreements=tuple(disagreements),
        settlements=tuple(settlements),
        quarantined=tuple(quarantined),
        nondeterministic=tuple(TrialRef(property_id=p, trial_index=i) for p, i in nondeterministic),
        outliers=tuple(outliers),
        replays_chosen=replays_chosen,
        replays_for_margin=replays_for_margin,
        replay_escape=replay_escape,
        replays_checked=replays_checked,
        unresolved=tuple(TrialRef(property_id=p, trial_index=i) for p, i in sorted(unresolved)),
        discarded=tuple(discarded),
        reran=reran,
        trusted=tuple(sorted(trusted)),
        verified_by=dict(sorted((verified_by or {}).items())),
    )


def summary_lines(summary: CrossCheckSummary, workers: dict[str, int]) -> list[str]:
    """A few lines for a report: who ran how many trials, the share, and anything found (at most 10 each)."""
    lines = []
    if workers:
        ran = ", ".join(f"{w or '(unnamed)'} {n}" for w, n in sorted(workers.items()))
        lines.append(f"trials by worker: {ran}")
    line = f"cross-checks: share {summary.share:.0%}, {summary.checked}/{summary.chosen} trials ran on a second worker"
    lines.append(line + (f" ({summary.note})" if summary.note else ""))
    if summary.replays_chosen:
        lines.append(
            f"statistical replays: {summary.replays_checked}/{summary.replays_chosen} ran on a second worker "
            f"({summary.replays_for_margin} for the band's margin)"
        )
    if summary.replay_escape:
        lines.append(
            f"statistical replays sized to replay_escape {summary.replay_escape:g}: the lies that turn a row "
            f"all go unreplayed with probability at most {summary.replay_escape:g}"
        )
    if summary.trusted:
        lines.append(f"owned workers (results counted with no second run): {', '.join(summary.trusted)}")
    if summary.verified_by:
        ran = ", ".join(f"{w} {n}" for w, n in summary.verified_by.items())
        lines.append(f"second runs by worker: {ran}")
    if summary.unresolved:
        shown = ", ".join(f"{t.property_id} trial {t.trial_index}" for t in summary.unresolved[:10])
        lines.append(f"unsettled replay disputes (their rows cannot pass): {shown}")
    if summary.discarded:
        lines.append(
            f"discarded workers (every result run again elsewhere, {summary.reran} trials): "
            f"{', '.join(summary.discarded)}"
        )
    lines.extend(f"worker_disagreement: {d.line()}" for d in summary.disagreements[:10])
    if summary.quarantined:
        lines.append(f"quarantined workers: {', '.join(summary.quarantined)}")
    if summary.nondeterministic:
        shown = ", ".join(f"{t.property_id} trial {t.trial_index}" for t in summary.nondeterministic[:10])
        lines.append(f"nondeterministic trials (nobody quarantined): {shown}")
    lines.extend(f"hit-rate outlier: {o.line()}" for o in summary.outliers[:10])
    return lines


def report_lines(summary: CrossCheckSummary | None, rows: Iterable[Mapping[str, int]]) -> list[str]:
    """What a report shows of the workers and cross-checks (the rows' worker maps summed), or nothing
    for a run on one machine that found nothing (a local pool's). Worker names are data."""
    totals: Counter[str] = Counter()
    for workers in rows:
        totals.update(workers)
    named = {worker: count for worker, count in totals.items() if worker}
    shown = summary is not None and (
        len(named) > 1 or summary.checked or summary.replays_checked or summary.disagreements or summary.outliers
    )
    if summary is None or not shown:
        return []
    return summary_lines(summary, named)
