"""The JSON that crosses the broker. A batch holds trials that differ only in their index, seed and
canary (gate.core.suite.batching), so it travels as one spec (the template) plus the indices, seeds and
canaries; observations travel as one JSON string that pydantic parses and validates in one pass. Both
keep the broker's own (slow, per-object) JSON work to a few strings per batch.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from gate import __version__
from gate.core.suite.batching import check_one_batch
from gate.core.suite.trial import Observation, TrialSpec

_OBSERVATIONS = TypeAdapter(list[Observation])


def encode_batch(specs: list[TrialSpec]) -> dict[str, Any]:
    """A batch as {"template": spec JSON, "indices": [...], "seeds": [...], "canaries": [...]}; refuses
    specs that differ in more."""
    check_one_batch(specs)
    first = specs[0]
    return {
        "template": first.model_dump_json(),
        "indices": [spec.trial_index for spec in specs],
        "seeds": [spec.seed for spec in specs],  # the coordinator's, one per trial
        "canaries": [spec.canary for spec in specs],  # one secret per trial, never shared
        "version": __version__,  # the coordinator's probegate: a worker of another version refuses the batch
    }


def version_refusal(payload: dict[str, Any]) -> str | None:
    """One line naming both versions when the batch's coordinator runs another probegate than this
    worker (the wire, the sandbox and the checks' inputs must agree); None when they match."""
    theirs = payload.get("version")
    if theirs == __version__:
        return None
    return (
        f"refused: this worker runs probegate {__version__}, the coordinator probegate {theirs or 'older than 0.2.0'}"
        "; install the same version on both"
    )


def decode_batch(payload: dict[str, Any]) -> list[TrialSpec]:
    """The batch's specs: the template with each trial's index, seed and canary."""
    template = TrialSpec.model_validate_json(payload["template"])
    count = len(payload["indices"])
    canaries = payload.get("canaries") or [template.canary] * count
    seeds = payload.get("seeds") or [template.seed] * count
    return [
        template.model_copy(update={"trial_index": int(index), "seed": int(seed), "canary": str(canary)})
        for index, seed, canary in zip(payload["indices"], seeds, canaries, strict=True)
    ]


def encode_observations(observations: list[Observation]) -> str:
    return _OBSERVATIONS.dump_json(observations).decode()


def decode_observations(text: str) -> list[Observation]:
    return _OBSERVATIONS.validate_json(text)
