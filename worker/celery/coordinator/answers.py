"""Which answers count: a batch's result meta turned into the observations the coordinator takes.

With a worker registry every result must be signed by an enrolled, unrevoked key over the batch id and
spec digest this coordinator issued (gate.core.trust.enrolment), and by the key of the worker the batch was
assigned to (worker.celery.coordinator.assigner): anything else is a harness event and harness faults for its trials,
never an observation. An accepted observation carries the enrolled name as its worker id, whatever the
worker wrote. `Answers` also remembers which key produced each worker id's results, so a cross-check avoids
that key's queue whatever the worker calls itself. A result from a worker running another probegate (or one
too old to say which) is refused too, naming both versions: the wire, sandbox and checks' inputs must agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gate import __version__
from gate.core.card.card import HarnessEvent
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from gate.core.trust.enrolment import EnrolledWorker, Refusal, Roster, check_assigned, check_result, spec_digest
from gate.io.workers import verify_pem
from worker.celery.shared.wire import decode_observations


class Answers:
    """The batches issued (batch id -> digest of the spec sent: what a signed result must name) and the key
    behind each worker id seen, with the checks that decide whether a result's observations count."""

    def __init__(self, events: list[HarnessEvent]) -> None:
        self.events = events
        self.issued: dict[str, str] = {}  # every batch id this coordinator sent -> digest of the spec it sent
        # worker id on an observation -> the key that signed it (enrolled and verified when a roster is in
        # force): a cross-check avoids the queue of the key that produced the result, whatever it calls itself.
        self._keys: dict[str, str] = {}
        self.refused: set[str] = set()  # batch ids whose result gave faults instead of observations

    def issue(self, task_id: str, payload: dict[str, Any]) -> None:
        """Note the batch sent as `task_id` with this wire payload: a signed result must name its digest."""
        self.issued[task_id] = spec_digest(payload)

    def key_of(self, worker_id: str) -> str:
        """The key that signed the results carrying `worker_id` (the id itself when none was seen)."""
        return self._keys.get(worker_id, worker_id)

    def observations(
        self,
        batch: list[TrialSpec],
        meta: dict[str, Any],
        task_id: str,
        roster: Roster | None,
        assigned: str | None,
    ) -> Iterator[Observation]:
        """The observations that count from batch `task_id`'s result meta; `roster`: the registry in force
        (None: results are not checked), `assigned`: the key the batch was sent to (None: not assigned)."""
        if meta.get("status") != "SUCCESS":
            detail = f"worker task {meta.get('status')}: {str(meta.get('result'))[:300]}"
            # A task that raised on the worker is a fault nobody has shown to be outside the patch.
            self.refused.add(task_id)
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.UNKNOWN) for s in batch)
            return
        result = meta["result"]
        signer: EnrolledWorker | None = None
        if roster is not None:
            checked = self._signer(task_id, result, roster, assigned)
            if not isinstance(checked, EnrolledWorker):
                # UNKNOWN, never HARNESS: a credit would let whoever forged it silence the property.
                self.refused.add(task_id)
                yield from (Observation.harness_fault(s, checked, origin=FaultOrigin.UNKNOWN) for s in batch)
                return
            signer = checked
        if (refusal := _version_refusal(result)) is not None:
            self.events.append(HarnessEvent(kind="worker_version", detail=f"batch {task_id}: {refusal}"[:300]))
            # UNKNOWN: the version is the worker's word, and a credit must not be for the taking.
            self.refused.add(task_id)
            yield from (Observation.harness_fault(s, refusal, origin=FaultOrigin.UNKNOWN) for s in batch)
            return
        if fetched := result.get("fetched"):
            self.events.append(
                HarnessEvent(
                    kind="image_fetched",
                    property_id=batch[0].property_id,
                    detail=f"{result['worker']} fetched {batch[0].image_id[:19]} via {fetched.get('via')} "
                    f"in {fetched.get('seconds')}s",
                )
            )
        if result.get("redelivered"):
            self.events.append(
                HarnessEvent(
                    kind="redelivery",
                    property_id=batch[0].property_id,
                    detail=f"{len(batch)} trials ran again from scratch on {result['worker']}",
                )
            )
        wanted = {spec.key for spec in batch}
        key_id = signer.key_id if signer is not None else _claimed_key(result)
        for obs in decode_observations(result["observations"]):
            if obs.key in wanted:
                # The enrolled name, never what the worker wrote about itself.
                obs = obs if signer is None else obs.model_copy(update={"worker_id": signer.name})
                if key_id:
                    self._keys[obs.worker_id] = key_id
                yield obs
            else:
                self.events.append(
                    HarnessEvent(
                        kind="stray_result",
                        property_id=obs.property_id,
                        detail=f"trial {obs.trial_index} was not in its batch; ignored",
                    )
                )

    def _signer(self, task_id: str, result: Any, roster: Roster, assigned: str | None) -> EnrolledWorker | str:
        """The enrolled worker whose signature binds this result to the batch we issued and who was assigned
        it, or (after recording a HarnessEvent of the refusal's kind) the fault detail for its trials."""
        observations = result.get("observations") if isinstance(result, dict) else None
        if not isinstance(observations, str):
            checked: EnrolledWorker | tuple[Any, str] = (Refusal.UNSIGNED, "the result carries no observations")
        else:
            claim = result.get("signature")
            checked = check_result(roster, self.issued, task_id, observations, claim, verify_pem)
            if isinstance(checked, EnrolledWorker):
                # Only the assigned key counts: another enrolled worker taking the batch off its queue would
                # choose which trials it answers.
                checked = check_assigned(roster, assigned, checked)
        if isinstance(checked, EnrolledWorker):
            return checked
        kind, detail = checked
        self.events.append(HarnessEvent(kind=str(kind), detail=f"batch {task_id}: {detail}"[:300]))
        return f"result refused ({kind}): {detail}"[:300]


def _claimed_key(result: Any) -> str | None:
    """The key id an unchecked result says signed it (no roster in force: a hint for routing cross-checks only)."""
    claim = result.get("signature") if isinstance(result, dict) else None
    key_id = claim.get("key_id") if isinstance(claim, dict) else None
    return key_id if isinstance(key_id, str) else None


def _version_refusal(result: Any) -> str | None:
    """One line naming both versions when the result's worker runs another probegate; None when they match."""
    theirs = result.get("version") if isinstance(result, dict) else None
    if theirs == __version__:
        return None
    named = theirs if isinstance(theirs, str) else "older than 0.2.0"
    return (
        f"refused: worker {str(result.get('worker'))[:80]} runs probegate {named[:40]}, this coordinator "
        f"probegate {__version__}; install the same version on both"
    )
