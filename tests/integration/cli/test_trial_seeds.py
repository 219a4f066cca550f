"""Trial seeds on real Docker, through the local pool and through a gate-worker over real Redis: the probe
reads the coordinator's seed for its trial from PROBEGATE_TRIAL_SEED, and the card's evidence records it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, UNENROLLED

from gate.core.suite.plan import trial_seed
from gate.io.artifacts import read_card
from gate.io.evidence import verified_records

pytestmark = pytest.mark.integration

PROBE = """import json, os, sys
json.load(sys.stdin)
print(json.dumps({"seed": os.environ["PROBEGATE_TRIAL_SEED"]}))
"""

CHECKS = '''from gate.core.checks import Trial


def saw_its_seed(trial: Trial) -> bool:
    """The seed the probe printed is the one the sandbox reported giving it."""
    assert trial.stdout_json()["seed"] == str(trial.observation.seed), trial.stdout_json()
    return True
'''

SUITE = """[suite]
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"

[[property]]
id = "sees_its_seed"
band = "statistical"
fixture = "tools/refund-query.json"
check = "checks:saw_its_seed"
deadline_s = 5.0
trials = 6
min_hits = 6
"""


@pytest.mark.parametrize("through", ["local", "celery"])
def test_the_probe_sees_its_trials_seed_and_the_card_records_it(through: str, tmp_path: Path, request) -> None:
    """Every trial's probe printed the seed the coordinator derived for it, and its record on the card says so."""
    root = tmp_path / "suite"
    shutil.copytree(EXAMPLE / "fixtures", root / "fixtures")
    shutil.copy(EXAMPLE / ".fixture-seal", root / ".fixture-seal")
    (root / "gate.toml").write_text(SUITE)
    (root / "checks.py").write_text(CHECKS)
    (root / "patch").mkdir()
    (root / "patch" / "probe.py").write_text(PROBE)
    extra: tuple[str, ...] = ()
    if through == "celery":
        workers = request.getfixturevalue("workers")
        workers.start("w1")
        workers.wait_ready()
        extra = ("--broker", request.getfixturevalue("redis_server").url, UNENROLLED)
    else:
        request.getfixturevalue("sandbox_image")
    card_path = tmp_path / "card.json"
    oracle = (
        "--suite",
        str(root / "gate.toml"),
        "--workdir",
        str(root / "patch"),
        "--seal",
        str(root / ".fixture-seal"),
    )
    argv = [sys.executable, "-m", "gate.cli", "run", *oracle, "--card", str(card_path), "--new-ledger", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    card = read_card(card_path)
    (row,) = card.properties
    assert (row.kind, row.hits, row.trials) == ("pass", 6, 6), row.detail
    records = sorted(verified_records(card, card_path), key=lambda r: r.trial_index)
    expected = [trial_seed(card.run_id, "sees_its_seed", index) for index in range(6)]
    assert [r.observation.seed for r in records] == expected
    assert [json.loads(r.observation.stdout.data)["seed"] for r in records] == [str(seed) for seed in expected]
    assert card.seeds_from is None and card.unenrolled_workers is (through == "celery")
