"""Flakes found on the base, on real Docker and git, as a user meets them: a repository made by `gate init`
whose probe calls the project's `textkit`, the contract property run four times (`repeat = 4`). A patch
that makes it flicker on a steady base is refused with no proposal; a base that flickers itself yields a
freeze proposal, which, given an owner and committed to the base, freezes the property on the next run.
Cut to its safety and contract properties, one trial each: nightly pairs (`gate baseline --twice`) over a
base that fails at random propose a freeze only when their colours differ, and only a run on the base's
own tree joins the flake history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_init import SLUGIFY, card, commit_all, gate, git, repo

from gate.core.errors import RET_BLOCKED, RET_OK
from gate.io.fixtures import seal_tree

pytestmark = [pytest.mark.integration, pytest.mark.kinds]
__all__ = ["repo"]  # the fixture, imported so pytest finds it

CONTRACT = "exact_answer"
# Wrong on odd trials of the contract's fixture ("Hello, World!") only: the same sealed bytes, a different
# colour by trial index; the statistical properties' fixtures stay right.
FLICKER = SLUGIFY.replace(
    '    """Lowercase ASCII words joined by \'-\'."""\n',
    '    """Lowercase ASCII words joined by \'-\'."""\n'
    "    import os\n\n"
    '    if text.startswith("Hello") and int(os.environ.get("PROBEGATE_TRIAL_INDEX", "0")) % 2:\n'
    "        return text\n",
)


@pytest.fixture
def suite_repo(repo: Path) -> Path:
    """The init'd repository with textkit under src/, the probe calling it, the contract property repeated
    four times and a freeze file named (empty); nothing committed after `init` yet."""
    assert FLICKER != SLUGIFY
    (repo / "src").mkdir()
    (repo / "textkit.py").rename(repo / "src" / "textkit.py")
    toml = repo / "gate.toml"
    text = toml.read_text().replace('# pythonpath = ["src"]', 'pythonpath = ["src"]', 1)
    text = text.replace('# freeze_file = "flake-freeze.json"', 'freeze_file = "flake-freeze.json"', 1)
    head, sep, rest = text.partition(f'id = "{CONTRACT}"\n')
    toml.write_text(head + sep + "repeat = 4\n" + rest)
    (repo / "flake-freeze.json").write_text(json.dumps({"freezes": []}))
    probe = repo / "probe.py"
    stand_in = SLUGIFY.split('"""\n')[1]
    call = "    from textkit import slugify\n\n    return slugify(text)\n"
    probe.write_text(probe.read_text().replace(stand_in, call, 1))
    return repo


def row(repo: Path, pid: str) -> dict:
    return next(r for r in card(repo)["properties"] if r["id"] == pid)


def test_a_patch_that_makes_a_contract_flicker_on_a_steady_base_is_refused_unexcused(suite_repo: Path) -> None:
    """Steady base, flickering patch: the row fails the contract with its colour change, the base rerun says
    steady_on_base, the job is blocked, and no freeze proposal or repair task is written."""
    commit_all(suite_repo, "the suite, over a steady textkit")
    (suite_repo / "src" / "textkit.py").write_text(FLICKER)
    commit_all(suite_repo, "a patch that flickers")
    ran = gate(suite_repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    assert ran.returncode == RET_BLOCKED, ran.stderr
    contract = row(suite_repo, CONTRACT)
    assert contract["kind"] == "fail_contract"
    assert contract["colour_change"] == {"hits": [0, 2], "misses": [1, 3]}
    assert contract["base_rerun"]["verdict"] == "steady_on_base"
    assert not (suite_repo / ".probegate" / "freeze-proposal.json").exists()
    assert not (suite_repo / ".probegate" / "repair-task.md").exists()
    assert gate(suite_repo, "accept", "--base", "HEAD~1").returncode == RET_BLOCKED


def test_a_base_flake_is_proposed_and_the_owned_freeze_holds_on_the_next_run(suite_repo: Path) -> None:
    """Flickering base: the run stays blocked (a flake is reported, never excused in the run that found it)
    and proposes a freeze; the entry, given an owner and committed to the base before the patch, freezes
    the property on the next run, which exits 0 and is accepted."""
    (suite_repo / "src" / "textkit.py").write_text(FLICKER)
    commit_all(suite_repo, "the suite, over a flaky textkit")
    base = git(suite_repo, "rev-parse", "HEAD").strip()
    (suite_repo / "src" / "notes.py").write_text("NOTE = 'unrelated'\n")
    commit_all(suite_repo, "an unrelated patch")
    patch = git(suite_repo, "rev-parse", "HEAD").strip()
    ran = gate(suite_repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    assert ran.returncode == RET_BLOCKED, ran.stderr
    assert row(suite_repo, CONTRACT)["base_rerun"]["verdict"] == "flake"
    proposal = json.loads((suite_repo / ".probegate" / "freeze-proposal.json").read_text())
    (entry,) = proposal["freezes"]
    assert (entry["properties"], entry["owner"], entry["retry_allowed"]) == ([CONTRACT], "", False)
    assert card(suite_repo)["run_id"] in entry["reason"]
    task = (suite_repo / ".probegate" / "repair-task.md").read_text()
    assert CONTRACT in task and base in task
    # The proposal lands on the base by its own commit, with an owner; the patch is replayed on top of it.
    git(suite_repo, "checkout", "-q", "-b", "with-freeze", base)
    (suite_repo / "flake-freeze.json").write_text(json.dumps({"freezes": [{**entry, "owner": "@textkit-team"}]}))
    commit_all(suite_repo, "freeze the flaky contract property")
    git(suite_repo, "cherry-pick", patch)
    again = gate(suite_repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    assert again.returncode == RET_OK, again.stderr
    frozen = row(suite_repo, CONTRACT)
    assert (frozen["voting"], frozen["frozen_by"]) == (False, entry["freeze_id"])
    assert gate(suite_repo, "accept", "--base", "HEAD~1").returncode == RET_OK


# Wrong with probability 1/2 on the contract's fixture, drawn from os.urandom inside the sandbox: trials are
# seeded by index and the clock is frozen, so only such a draw can make two runs of one commit differ.
COIN = SLUGIFY.replace(
    '    """Lowercase ASCII words joined by \'-\'."""\n',
    '    """Lowercase ASCII words joined by \'-\'."""\n'
    "    import os\n\n"
    '    if text.startswith("Hello") and os.urandom(1)[0] < 128:\n'
    "        return text\n",
)
# Each pair's colours differ with probability 1/2 (pass+fail or fail+pass, 1/4 each), independently of the
# other pairs. The test needs one pair of each sort and stops as soon as it has seen both (3 pairs on
# average). It could fail by chance only if the first MAX_PAIRS pairs all came out alike: 2 * 2**-40, about
# once in 5e11 runs; at 12 pairs it was once in 2,048, a CI failure every few weeks.
MAX_PAIRS = 40


def small_suite(repo: Path) -> None:
    """Cut the suite to its safety and contract properties, one trial each: the two statistical properties
    and the contract's `repeat = 4` would only slow these runs down."""
    toml = repo / "gate.toml"
    text = toml.read_text().replace("repeat = 4\n", "", 1)
    head = text[: text.index('id = "answer_rate"')]
    toml.write_text(head[: head.rindex("[[property]]")])


def coin_suite(repo: Path) -> None:
    """The small suite over the coin-tossing textkit, committed."""
    small_suite(repo)
    (repo / "src" / "textkit.py").write_text(COIN)
    commit_all(repo, "the suite, over a textkit that tosses a coin")


def nightly_pair(repo: Path) -> tuple[int, dict, dict, dict]:
    """`gate baseline --twice --base HEAD`, as the nightly job runs it: (exit, nightly line, first card, card)."""
    done = gate(
        repo, "--log-level", "warning", "baseline", "--twice", "--base", "HEAD",
        "--calibration", ".probegate/calibration.json",
    )  # fmt: skip
    assert done.returncode in (RET_OK, RET_BLOCKED), done.stderr
    line = json.loads(done.stdout.splitlines()[-1])["nightly"]
    first = json.loads((repo / ".probegate" / "baseline-card.first.json").read_text())
    second = json.loads((repo / ".probegate" / "baseline-card.json").read_text())
    return done.returncode, line, first, second


def kind(card_data: dict, pid: str) -> str:
    return next(r["kind"] for r in card_data["properties"] if r["id"] == pid)


def test_two_nightly_runs_that_differ_propose_a_freeze_naming_both_and_alike_ones_nothing(suite_repo: Path) -> None:
    """Real `gate baseline --twice` pairs over a contract property that fails at random on the base: a pair
    whose colours differ exits 1 with a freeze proposal and repair task naming both run ids and the measured
    cause (the residual), recorded in the books' history; a pair whose colours agree writes no proposal (and
    removes an earlier one)."""
    coin_suite(suite_repo)
    head = git(suite_repo, "rev-parse", "HEAD").strip()
    proposal_file = suite_repo / ".probegate" / "freeze-proposal.json"
    task_file = suite_repo / ".probegate" / "repair-task.md"
    seen = {"alike": 0, "differ": 0}
    for _ in range(MAX_PAIRS):
        code, line, first, second = nightly_pair(suite_repo)
        runs = [first["run_id"], second["run_id"]]
        assert line["runs"] == runs and runs[0] != runs[1]
        assert kind(first, "stays_in_bounds") == kind(second, "stays_in_bounds") == "pass"
        colours = (kind(first, CONTRACT), kind(second, CONTRACT))
        assert set(colours) <= {"pass", "fail_contract"}, colours
        if colours[0] != colours[1]:
            seen["differ"] += 1
            assert code == RET_BLOCKED
            (entry,) = json.loads(proposal_file.read_text())["freezes"]
            assert (entry["properties"], entry["owner"], entry["seal"]) == ([CONTRACT], "", second["fixture"]["seal"])
            assert all(run_id in entry["reason"] for run_id in runs) and head in entry["reason"]
            # The coin is os.urandom: explained as the residual, and the reason says so.
            assert line["causes"] == {CONTRACT: "residual"} and "cause residual:" in entry["reason"]
            assert [c["source"] for c in second["flake_causes"]] == ["residual"]
            assert entry["created_at"].replace("Z", "+00:00") == second["created_at"].replace("Z", "+00:00")
            assert line["freezes_proposed"] == [entry["freeze_id"]]
            assert all(run_id in task_file.read_text() for run_id in runs)
            assert second["flake_files"]["freeze_ids"] == [entry["freeze_id"]]
            (flake,) = second["pair_flakes"]
            assert (flake["first"]["run_id"], flake["second"]["run_id"]) == tuple(runs)
        else:
            seen["alike"] += 1
            assert code == (RET_OK if colours[0] == "pass" else RET_BLOCKED)
            assert line["flakes"] == [] and line["freezes_proposed"] == []
            assert not proposal_file.exists() and not task_file.exists()
            assert second["flake_files"] is None and second["pair_flakes"] == []
        history = json.loads((suite_repo / ".probegate" / "ledger.json").read_text())["history"][CONTRACT]
        assert [e["run_id"] for e in history[-2:]] == runs and {e["commit"] for e in history[-2:]} == {head}
        if seen["alike"] and seen["differ"]:
            break
    assert seen["alike"] and seen["differ"], seen


def test_a_run_on_the_base_tree_joins_the_flake_history_and_a_patch_run_does_not(suite_repo: Path) -> None:
    """With an owned freeze of the contract property committed, `gate run --base HEAD` on the base's own
    tree records the frozen property in the books' history; a patch's `gate run --base HEAD~1`, passing
    it just the same, adds nothing, and its card says its tree differs from the base's."""
    small_suite(suite_repo)
    now = datetime.now(UTC)
    entry = {
        "freeze_id": "flake-exact",
        "properties": [CONTRACT],
        "seal": seal_tree(suite_repo / "fixtures").digest,
        "reason": "flickered on the base",
        "created_at": (now - timedelta(hours=1)).isoformat(),
        "expires_at": (now + timedelta(days=7)).isoformat(),
        "owner": "@textkit-team",
    }
    (suite_repo / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    commit_all(suite_repo, "the suite, with a freeze")
    ledger = suite_repo / ".probegate" / "ledger.json"
    ran = gate(suite_repo, "--log-level", "warning", "run", "--base", "HEAD")
    assert ran.returncode == RET_OK, ran.stderr
    on_base = card(suite_repo)
    assert on_base["freeze_set"] == {CONTRACT: "flake-exact"}
    assert on_base["flake_history"].startswith("recorded in the flake history")
    (recorded,) = json.loads(ledger.read_text())["history"][CONTRACT]
    assert (recorded["run_id"], recorded["kind"]) == (on_base["run_id"], "pass")

    (suite_repo / "src" / "textkit.py").write_text(SLUGIFY + "\n# a patch that changes nothing the probe sees\n")
    commit_all(suite_repo, "a patch")
    again = gate(suite_repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    assert again.returncode == RET_OK, again.stderr
    patch_card = card(suite_repo)
    assert row(suite_repo, CONTRACT)["kind"] == "pass"
    assert "the tree differs from base" in patch_card["flake_history"]
    assert [e["run_id"] for e in json.loads(ledger.read_text())["history"][CONTRACT]] == [on_base["run_id"]]
