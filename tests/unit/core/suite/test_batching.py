"""gate.core.suite.batching: the one rule for which trials share a batch (and so a broker message and a container)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.batching import batch_key, batches, check_one_batch
from gate.core.suite.trial import Limits
from gate.core.testing import make_spec


def test_trials_differing_only_in_index_and_canary_share_a_key() -> None:
    """Index and canary are per trial; they never split a batch."""
    assert batch_key(make_spec(0, canary="a")) == batch_key(make_spec(7, canary="b"))


@pytest.mark.parametrize(
    "field",
    [
        {"property_id": "q"},
        {"tree_digest": "other"},
        {"deadline_s": 9.0},
        {"limits": Limits(pids=32)},
        {"image_id": "sha256:" + "1" * 64},
        {"run_id": "r2"},
    ],
    ids=lambda f: next(iter(f)),
)
def test_any_other_difference_splits_a_batch(field: dict) -> None:
    """A property, tree, deadline, limit, image or run of its own is another batch; the wire refuses a mix."""
    mixed = [make_spec(0), make_spec(1, **field)]
    assert len(batches(mixed, 10)) == 2
    with pytest.raises(ValueError, match="different shape"):
        check_one_batch(mixed)


@given(
    props=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=60),
    size=st.integers(min_value=1, max_value=8),
)
def test_batches_partition_the_specs_in_order(props: list[str], size: int) -> None:
    """Every spec lands in exactly one batch of at most `size`, each batch is one key, order kept per key."""
    specs = [make_spec(i, property_id=p, canary=f"c{i}") for i, p in enumerate(props)]
    made = batches(specs, size)
    assert sorted(s.trial_index for b in made for s in b) == list(range(len(specs)))
    for batch in made:
        assert 1 <= len(batch) <= size
        check_one_batch(batch)
        assert [s.trial_index for s in batch] == sorted(s.trial_index for s in batch)
