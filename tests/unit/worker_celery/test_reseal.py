"""The pure parts of `gate reseal`: the change report, the nightly schedule, and that the deploy
files run the re-seal at the same minute the module names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

from gate.core.suite.seal import Seal, describe_change
from worker.celery.shared.app import TASK_RESEAL
from worker.celery.worker.beat import BEAT_ENTRY, NIGHTLY_CRON

A, B, C, D = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)


def test_equal_digests_report_unchanged() -> None:
    """Equal digests give exactly {"changed": false, "seal": digest}."""
    seal = Seal(digest=A, manifest={"x.json": B})
    assert describe_change(seal, seal, written=False) == {"changed": False, "seal": A}


def test_equal_digest_without_manifest_is_unchanged() -> None:
    """A digest-only seal file whose digest matches is current, manifest or not."""
    assert describe_change(Seal(digest=A), Seal(digest=A, manifest={"x": B}), written=False)["changed"] is False


def test_changed_added_removed_are_named() -> None:
    """The report names changed, added and removed files from the manifest diff."""
    old = Seal(digest=A, manifest={"keep": B, "edit": B, "gone/x": B})
    new = Seal(digest=D, manifest={"keep": B, "edit": C, "new/y": C})
    report = describe_change(old, new, written=True)
    assert report["changed"] is True
    assert report["seal"] == D and report["previous"] == A
    assert report["files"] == {"changed": ["edit"], "added": ["new/y"], "removed": ["gone/x"]}
    assert report["written"] is True
    assert "changed edit" in report["detail"]


def test_missing_seal_lists_every_file_as_added() -> None:
    """With no seal file every file of the tree is reported as added, in pathlib order."""
    new = Seal(digest=D, manifest={"a-b/x": B, "a/b": C})
    report = describe_change(None, new, written=False)
    assert report["previous"] is None
    assert report["files"] == {"changed": [], "added": ["a/b", "a-b/x"], "removed": []}


def test_digest_only_seal_says_it_cannot_name_files() -> None:
    """A stale digest-only seal reports no file lists and says why."""
    report = describe_change(Seal(digest=A), Seal(digest=D, manifest={"x": B}), written=False)
    assert report["files"] == {"changed": [], "added": [], "removed": []}
    assert report["detail"] == "no file-level manifest to compare"


def test_report_is_json() -> None:
    """The report serialises to one JSON line."""
    line = json.dumps(describe_change(None, Seal(digest=D, manifest={"x": B}), written=False))
    assert "\n" not in line and json.loads(line)["changed"] is True


def test_beat_schedule_entry_is_nightly_at_0317() -> None:
    """beat_schedule runs probegate.reseal at 03:17 daily with the two paths as args."""
    crontab = pytest.importorskip("celery.schedules").crontab
    from worker.celery.worker.beat import beat_schedule

    entry = beat_schedule("/srv/f", "/srv/s")[BEAT_ENTRY]
    assert entry["task"] == TASK_RESEAL == "probegate.reseal"
    assert entry["args"] == ["/srv/f", "/srv/s"]
    assert entry["schedule"] == crontab(minute=17, hour=3)
    assert set(entry) == {"task", "schedule", "args"}


def test_beat_schedule_routes_to_a_named_queue() -> None:
    """With queue= the entry carries options.queue, so a worker consuming only that queue gets it."""
    pytest.importorskip("celery")
    from worker.celery.worker.beat import beat_schedule

    entry = beat_schedule("/srv/f", "/srv/s", queue="probegate.img")[BEAT_ENTRY]
    assert entry["options"] == {"queue": "probegate.img"}


def test_module_imports_without_celery() -> None:
    """Importing gate.io.reseal in a fresh interpreter does not load celery (the beat entry lives in worker)."""
    code = "import json, sys, gate.io.reseal; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert "celery" not in loaded and "gate.io.reseal" in json.loads(done.stdout)


def test_deploy_files_use_the_same_schedule() -> None:
    """The cron file and the systemd timer run the re-seal at NIGHTLY_CRON's minute and hour."""
    minute, hour = NIGHTLY_CRON.split()[:2]
    cron_lines = [ln for ln in (ROOT / "deploy" / "reseal.cron").read_text().splitlines() if ln and ln[0].isdigit()]
    assert [ln.split()[:5] for ln in cron_lines] == [NIGHTLY_CRON.split()]
    timer = (ROOT / "deploy" / "probegate-reseal.timer").read_text()
    assert f"OnCalendar=*-*-* {int(hour):02d}:{int(minute):02d}:00" in timer.splitlines()


def test_seal_write_inside_the_tree_it_seals_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate seal fixtures --write fixtures/seal` is refused as `gate reseal` refuses it (64), and
    nothing is written; a seal beside the tree is written as before (issue 26)."""
    from gate.cli.main import main

    tree = tmp_path / "fixtures"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.json").write_text("{}")
    for inside in (tree / "seal", tree / "sub" / "seal", tree / "sub" / ".." / "seal"):
        assert main(["seal", str(tree), "--write", str(inside)]) == 64
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--write" in err and "outside the tree it seals" in err
    assert sorted(p.name for p in tree.rglob("*")) == ["a.json", "sub"]
    assert main(["seal", str(tree), "--write", str(tmp_path / "fixtures.seal")]) == 0
    assert (tmp_path / "fixtures.seal").is_file()
