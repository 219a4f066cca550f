"""The I/O of statistical replays and of discarding a caught worker (the rules are
`gate.core.trust.replay`'s): the chosen statistical trials go again, spec for spec, to a worker other
than the one that ran them; a different outcome goes to a third worker, `REPLAY_REPRODUCE` times; a dispute no
quarantine settled leaves its trial an unproven fault; and every result of a caught worker is run again
on the others, or, when that cannot be done, becomes an unproven fault.

A paired property's chosen index goes again whole: its base trial and its patch trial, to one worker that ran
neither (a liar running both sides could otherwise report no difference and have only one side looked at).

A replay is the very `TrialSpec` the primary was (same seed, canary, run and index), sent the same way
(`Executor.run_elsewhere`, a worker's direct queue), so a worker cannot tell a replay from a primary by
its content; and the trials to replay are drawn after every primary is in, so a primary cannot know
whether it will be replayed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.core.card.card import HarnessEvent
from gate.core.suite.trial import FaultOrigin, Observation, Side
from gate.core.trust.crosscheck import Pair, Settlement, WorkerDisagreement, settle, settle_by_owner
from gate.core.trust.replay import REPLAY_REPRODUCE, Choice, compare, discards, on_rows, unproven
from gate.core.verdicts.verdict import OutcomeKind
from gate.run.secondruns import Key, Step

NO_SECOND = "statistical rows unchecked: no second worker to replay on"


@dataclass(frozen=True)
class Replayed:
    """What the replays found: trials replayed, disputes, their tie-breaks, the trials left unproven."""

    checked: int
    unchecked: int
    disagreements: tuple[WorkerDisagreement, ...]
    settlements: tuple[Settlement, ...]
    unresolved: tuple[tuple[str, int], ...]


def replay(step: Step, choice: Choice) -> Replayed:
    """Replay `choice` on other workers and count each pair's worse outcome in place (rules 2 and 3); a paired
    property's chosen index is replayed whole, its base trial beside its patch trial on one other worker."""
    primaries: dict[Key, Observation] = {}
    avoid: dict[Key, frozenset[str]] = {}
    for property_id, indices in choice.indices.items():
        paired = step.tallies[property_id].paired
        for index in indices:
            obs, _ = step.counted(property_id, index)
            pair = [obs]
            if paired and (base := _base_of(step, property_id, index)) is not None:
                pair.insert(0, base)  # the base side first, as the waves send them
            workers = frozenset(o.worker_id for o in pair)  # a liar running either side runs neither replay
            for one in pair:
                primaries[one.key], avoid[one.key] = one, workers
    if not primaries:
        return Replayed(0, 0, (), (), ())
    seconds = step.elsewhere(avoid, 1)
    checked = unchecked = 0
    disagreements: list[WorkerDisagreement] = []
    on_base: list[WorkerDisagreement] = []
    disputed: dict[Key, tuple[Observation, Observation]] = {}
    for key, obs in primaries.items():
        side = key[3]
        judged = [(o, c) for o, c in seconds.get(key, []) if c.kind is not OutcomeKind.FAULT]
        if not judged:
            unchecked += side is Side.PATCH
            if step.strict:  # an enrolled worker's unchecked word carries nothing (`Step.unproven`)
                step.unproven(key, obs, step.counted(key[1], key[2], side)[1])
            continue
        pair = compare((obs, step.counted(key[1], key[2], side)[1]), judged[0])
        if side is Side.BASE:
            # The worse outcome for the patch is the base's better one: rule 2's "worse counts" and rule 3's
            # "claimed the better outcome" read the other way here, so a base dispute is no proof, only unproven.
            if pair.disagreement is not None:
                on_base.append(pair.disagreement)
                fault(step, key, "base-tree replays disagree: a paired row cannot rest on either")
            continue
        checked += 1
        step.count(pair)
        if pair.disagreement is not None:
            disagreements.append(pair.disagreement)
            disputed[key] = (obs, judged[0][0])
    settlements: list[Settlement] = []
    unresolved: list[tuple[str, int]] = [(d.property_id, d.trial_index) for d in on_base]
    by_owner: list[Settlement] = []  # an owned worker's word settles its disputes: no third worker, no demotion
    for key, (a, b) in list(disputed.items()):
        if (settled := settle_by_owner(a, b, step.trusted)) is not None:
            by_owner.append(settled)
            del disputed[key]
    if disputed:
        thirds = step.elsewhere(
            {key: frozenset({a.worker_id, b.worker_id}) for key, (a, b) in disputed.items()}, REPLAY_REPRODUCE
        )
        for key, (a, b) in disputed.items():
            reruns = thirds.get(key, [])
            settlements.append(settle(a, b, [o for o, _ in reruns][:REPLAY_REPRODUCE]))
            for rerun in reruns:
                if rerun[1].kind is not OutcomeKind.FAULT:
                    step.count(compare(step.counted(key[1], key[2]), rerun))
        settlements = list(on_rows(settlements, disagreements))
        keys = {(key[1], key[2]): key for key in disputed}
        for settlement in settlements:
            if unproven(settlement):
                key = keys[settlement.property_id, settlement.trial_index]
                unresolved.append((key[1], key[2]))
                fault(step, key, f"replays disagree and no tie-break settled it: {settlement.detail}")
    settlements.extend(by_owner)
    return Replayed(checked, unchecked, (*disagreements, *on_base), tuple(settlements), tuple(sorted(set(unresolved))))


def _base_of(step: Step, property_id: str, index: int) -> Observation | None:
    """The counted base-tree observation of a paired property's trial index (None: it never reported)."""
    tally = step.tallies[property_id]
    return next((o for o in tally.base_observations if o.trial_index == index), None)


def discard(step: Step, liars: frozenset[str]) -> int:
    """Run every trial whose counted result came from a caught worker again on the others (rule 4), the
    rerun's result in place of the discarded one; a trial no other worker answers is an unproven fault."""
    if not liars:
        return 0
    counted = [obs for tally in step.tallies.values() for obs in (*tally.observations, *tally.base_observations)]
    keys = discards(counted, liars)
    if not keys:
        return 0
    again = step.elsewhere(dict.fromkeys(keys, liars), 1)
    for key in keys:
        judged = [(o, c) for o, c in again.get(key, []) if c.kind is not OutcomeKind.FAULT]
        if judged:
            step.count(Pair(observation=judged[0][0], outcome=judged[0][1]))
        else:
            fault(
                step,
                key,
                f"the result of caught worker(s) {', '.join(sorted(liars))} was discarded; no other worker ran it",
            )
    for liar in sorted(liars):
        mine = sum(1 for obs in counted if obs.worker_id == liar)
        detail = (
            f"{liar} was caught by a tie-break: its {mine} counted result(s) were discarded and run again elsewhere"
        )
        step.events.append(HarnessEvent(kind="worker_discarded", detail=detail[:300]))
    return len(keys)


def fault(step: Step, key: Key, detail: str) -> None:
    """The trial counts as a fault nobody proved outside the patch (no credit): its row cannot pass."""
    spec = step.sent[key]
    obs = Observation.harness_fault(spec, detail[:300], origin=FaultOrigin.UNKNOWN)
    step.count(Pair(observation=obs, outcome=step.judge(step.tallies[key[1]].prop, obs)))
    trial = f"base trial {key[2]}" if key[3] is Side.BASE else f"trial {key[2]}"
    step.events.append(HarnessEvent(kind="replay_unproven", property_id=key[1], detail=f"{trial}: {detail}"[:300]))
