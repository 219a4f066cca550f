"""The explain knobs on the host side, without Docker: what the probe's environment and the batch file
carry, how a warm container's faketimerc follows each batch's clock mode, and the wire keeping them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from gate.core.suite.trial import ClockSpec, Interpreter, Limits
from gate.core.testing import make_spec, make_specs
from worker.box.warmclient import Knobs
from worker.celery.shared.wire import decode_batch, encode_batch
from worker.host.batchfile import batch_file, probe_env
from worker.host.warm import UNBOUND_CLOCK, BoundShape, Warm


def test_a_set_hash_seed_reaches_the_probe_environment_and_an_unset_one_does_not():
    """PYTHONHASHSEED is the spec's hash_seed when set (0 included) and absent otherwise."""
    assert "PYTHONHASHSEED" not in probe_env(make_spec())
    assert probe_env(make_spec(hash_seed=1234))["PYTHONHASHSEED"] == "1234"
    assert probe_env(make_spec(hash_seed=0))["PYTHONHASHSEED"] == "0"


def test_the_batch_file_carries_the_knobs_the_warm_parent_needs():
    """The batch says its hash seed, ASLR, clock mode and instant, which Knobs reads back as a parent's."""
    default = batch_file(make_specs(2))
    assert (default["hash_seed"], default["aslr"], default["clock_ticks"]) == (None, True, False)
    assert Knobs.of(default) == Knobs()
    specs = make_specs(2, hash_seed=7, aslr=False, clock_ticks=True, interpreter=Interpreter.WARM)
    batch = batch_file(specs)
    assert batch["faketime"] == "2026-03-01 00:00:00"
    assert Knobs.of(batch) == Knobs(hash_seed=7, aslr=False, ticking_from="2026-03-01 00:00:00")
    assert all(trial["env"]["PYTHONHASHSEED"] == "7" for trial in batch["trials"])


def test_the_batch_file_asks_for_the_step_split_only_when_told():
    """A batch asks the supervisor where each trial's time went (`timings`) only for a sandbox told to."""
    assert batch_file(make_specs(2))["timings"] is False
    assert batch_file(make_specs(2), timings=True)["timings"] is True


class _NoDir:
    def cleanup(self) -> None:
        pass


def _warm(root: Path) -> Warm:
    in_dir, src = root / "in", root / "src"
    in_dir.mkdir()
    src.mkdir()
    (in_dir / "faketimerc").write_text(UNBOUND_CLOCK + "\n")
    warm = Warm("run", _NoDir(), in_dir, src)  # type: ignore[arg-type]
    clock = ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC))
    warm.shape = BoundShape("run", "tree", clock, Limits(), "img")
    return warm


def test_each_batch_sets_the_clock_mode_of_a_warm_container_in_place(tmp_path: Path):
    """A ticking batch makes the faketimerc "@instant" and a frozen one " instant", in the same inode."""
    warm = _warm(tmp_path)
    path = warm.in_dir / "faketimerc"
    inode = path.stat().st_ino
    warm.send({"clock_ticks": True}, {})
    assert path.read_bytes() == b"@2026-03-01 00:00:00\n" and warm.clock_ticks
    warm.send({"clock_ticks": True}, {})
    assert path.read_bytes() == b"@2026-03-01 00:00:00\n"
    warm.send({"clock_ticks": False}, {})
    assert path.read_bytes() == b" 2026-03-01 00:00:00\n" and not warm.clock_ticks
    assert path.stat().st_ino == inode
    assert sorted(p.name for p in warm.in_dir.iterdir()) == ["batch-2.json", "faketimerc"]


def test_the_wire_round_trips_the_knobs():
    """A batch with every knob set crosses the broker unchanged; one without any keeps its old bytes."""
    specs = make_specs(3, hash_seed=2**32 - 1, aslr=False, clock_ticks=True)
    assert decode_batch(encode_batch(specs)) == specs
    plain = make_specs(2)
    payload = encode_batch(plain)
    assert decode_batch(payload) == plain
    assert not any(name in payload["template"] for name in ("hash_seed", "aslr", "clock_ticks"))
