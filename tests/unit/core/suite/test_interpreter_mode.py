"""The suite's interpreter mode: validated, carried into every spec, its digest and batch, the batch
file and the card."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from gate.core.card.stamp import interpreter_facts
from gate.core.suite.batching import batch_key
from gate.core.suite.journal import canonical, spec_digest
from gate.core.suite.suite import SuiteConfig, warm_refusal
from gate.core.suite.trial import Interpreter, Observation, TrialSpec
from gate.core.testing import make_spec
from worker.host.batchfile import batch_file


def test_the_default_is_a_fresh_interpreter() -> None:
    """A suite that names no mode runs each probe in a fresh interpreter."""
    assert SuiteConfig().interpreter == "fresh"
    assert make_spec().interpreter is Interpreter.FRESH


@pytest.mark.parametrize(
    "probe", [("python3", "probe.py"), ("python", "p.py", "-v"), ("/usr/bin/python3.13", "-m", "pkg.probe")]
)
def test_warm_takes_a_python_script_or_module(probe: tuple[str, ...]) -> None:
    """`python3 SCRIPT` and `python3 -m MODULE` probes may run warm."""
    assert warm_refusal(probe) is None
    assert SuiteConfig(probe=probe, interpreter="warm").interpreter == "warm"


@pytest.mark.parametrize(
    ("probe", "why"),
    [(("sh", "probe.sh"), "Python probes only"), (("python3", "-c", "pass"), "SCRIPT"), (("python3", "-m"), "MODULE")],
)
def test_warm_refuses_what_a_fork_cannot_start(probe: tuple[str, ...], why: str) -> None:
    """A probe that is not Python, or starts Python with options, is refused in warm mode, saying why."""
    with pytest.raises(ValidationError, match=why):
        SuiteConfig(probe=probe, interpreter="warm")
    assert SuiteConfig(probe=probe).interpreter == "fresh"  # the fresh mode runs any command


def test_an_unknown_mode_is_refused() -> None:
    """Only "fresh" and "warm" are modes."""
    with pytest.raises(ValidationError):
        SuiteConfig(interpreter="hot")  # type: ignore[arg-type]


def test_the_mode_is_in_the_spec_digest_and_the_batch_key() -> None:
    """A warm trial's spec differs from the fresh one's in its digest, so a journal or card tells them apart,
    and the two never share a batch."""
    fresh, warm = make_spec(), make_spec(interpreter=Interpreter.WARM)
    assert spec_digest(fresh) != spec_digest(warm)
    assert batch_key(fresh) != batch_key(warm)


def test_the_batch_file_names_the_mode() -> None:
    """The supervisor learns the mode from the batch file."""
    assert batch_file([make_spec(interpreter=Interpreter.WARM)])["interpreter"] == "warm"
    assert batch_file([make_spec()])["interpreter"] == "fresh"


def _obs(index: int, mode: Interpreter | None, seed: int | None) -> Observation:
    return Observation.of(make_spec(index), interpreter=mode, hash_seed=seed)


def test_the_card_says_the_mode_and_how_many_hash_seeds() -> None:
    """The card's interpreter is the trials' one mode, or mixed; it counts distinct warm parents' seeds."""
    warm = [_obs(0, Interpreter.WARM, 7), _obs(1, Interpreter.WARM, 7), _obs(2, Interpreter.WARM, 9)]
    assert interpreter_facts(warm) == ("warm", 2)
    assert interpreter_facts([*warm, _obs(3, Interpreter.FRESH, None)]) == ("mixed", 2)
    assert interpreter_facts([_obs(0, None, None)]) == (None, 0)


def test_records_from_before_the_modes_keep_their_digests() -> None:
    """A fresh spec digests as it did before the key existed, and an observation that says no mode dumps
    without the new keys, so stored journals and evidence records still match their digests."""
    spec = make_spec()
    data = spec.model_dump(mode="json")
    assert "interpreter" not in data and spec_digest(spec) == hashlib.sha256(canonical(data)).hexdigest()
    warm = make_spec(interpreter=Interpreter.WARM)
    assert TrialSpec.model_validate_json(warm.model_dump_json()) == warm
    assert TrialSpec.model_validate_json(spec.model_dump_json()) == spec
    unsaid = Observation.of(spec).model_dump(mode="json")
    assert "interpreter" not in unsaid and "hash_seed" not in unsaid
    said = Observation.of(spec, interpreter=Interpreter.WARM, hash_seed=7)
    assert Observation.model_validate_json(said.model_dump_json()) == said


def test_a_forced_mode_replaces_the_suites_and_none_keeps_it(tmp_path: Path) -> None:
    """`with_interpreter` gives the suite in the forced mode (None or the same mode: the suite itself), and
    refuses warm for a probe a fork cannot start."""
    from gate.core.suite.suite import Suite

    fresh = Suite(path=tmp_path / "gate.toml", root=tmp_path, sha256="0" * 64, config=SuiteConfig(), properties=())
    assert fresh.with_interpreter(None) is fresh and fresh.with_interpreter("fresh") is fresh
    warm = fresh.with_interpreter("warm")
    assert (warm.config.interpreter, fresh.config.interpreter, warm.sha256) == ("warm", "fresh", fresh.sha256)
    shell = fresh.model_copy(update={"config": SuiteConfig(probe=("sh", "p.sh"))})
    with pytest.raises(ValueError, match="Python probes only"):
        shell.with_interpreter("warm")
