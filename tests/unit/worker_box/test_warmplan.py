"""The warm parent's plan without a container: the probe's command line, its sys.path, the names a tree
shadows, and the image's installed top-level names."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.box.warmplan import STDLIB, Probe, candidates, child_path, installed, module_name, shadowed


def test_a_script_probe_keeps_its_argv_and_its_folder_comes_first(tmp_path: Path) -> None:
    """`python3 probes/probe.py -v` sees argv ['probes/probe.py', '-v'] and its folder first on sys.path."""
    probe = Probe(["python3", "probes/probe.py", "-v"], str(tmp_path))
    assert probe.argv == ["probes/probe.py", "-v"] and probe.module is None
    env = {"PYTHONPATH": f"{tmp_path}/src::{tmp_path}/lib"}
    assert child_path(probe, env, ["/usr/lib/python3.13"]) == [
        f"{tmp_path}/probes",
        f"{tmp_path}/src",
        f"{tmp_path}/lib",
        "/usr/lib/python3.13",
    ]


def test_a_symlinked_script_puts_its_targets_folder_first(tmp_path: Path) -> None:
    """As CPython does, sys.path[0] is the folder of the script a symlink points at."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "probe.py").write_text("")
    (tmp_path / "probe.py").symlink_to("real/probe.py")
    assert Probe(["python3", "probe.py"], str(tmp_path)).first_path() == str(tmp_path / "real")


def test_a_module_probe_starts_in_its_cwd() -> None:
    """`python3 -m pkg.probe x` runs pkg.probe with the cwd first on sys.path."""
    probe = Probe(["/usr/bin/python3.13", "-m", "pkg.probe", "x"], "/work")
    assert probe.module == "pkg.probe" and probe.argv == ["-m", "x"] and probe.first_path() == "/work"


@pytest.mark.parametrize("argv", [["sh", "p.sh"], ["python3"], ["python3", "-c", "pass"], ["python3", "-u", "p.py"]])
def test_other_command_lines_are_refused(argv: list[str]) -> None:
    """Only the two forms a forked child can reproduce are accepted."""
    with pytest.raises(ValueError, match="SCRIPT"):
        Probe(argv, "/work")


@pytest.mark.parametrize(
    ("entry", "name"),
    [
        ("yaml.py", "yaml"),
        ("numpy", "numpy"),
        ("_speedups.cpython-313-x86_64-linux-gnu.so", "_speedups"),
        ("old.pyc", "old"),
        ("README.md", None),
        ("my-data", None),
        ("x.pth", None),
    ],
)
def test_module_name_of_a_folder_entry(entry: str, name: str | None) -> None:
    """Files and folders importable by a top-level name give it; anything else gives None."""
    assert module_name(entry) == name


def test_the_tree_shadows_what_its_folders_hold(tmp_path: Path) -> None:
    """Modules and packages in any of the folders are shadowed; a missing folder shadows nothing."""
    (tmp_path / "yaml.py").write_text("")
    (tmp_path / "numpy").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "sitecustomize.py").write_text("")
    folders = [str(tmp_path), str(tmp_path / "src"), str(tmp_path / "absent")]
    assert shadowed(folders) == {"yaml", "numpy", "src", "sitecustomize"}


def test_installed_names_come_from_top_level_or_record(tmp_path: Path) -> None:
    """A distribution's top_level.txt names its modules; without one, its RECORD's first path parts do."""
    listed = tmp_path / "PyYAML-6.0.dist-info"
    listed.mkdir()
    (listed / "top_level.txt").write_text("_yaml\nyaml\n")
    recorded = tmp_path / "python_dateutil-2.9.dist-info"
    recorded.mkdir()
    (recorded / "RECORD").write_text(
        "dateutil/__init__.py,sha256=x,1\ndateutil/tz/tz.py,,\npython_dateutil-2.9.dist-info/RECORD,,\n"
        "../../bin/tool,,\nsix.py,,\n"
    )
    assert installed([str(tmp_path), str(tmp_path / "absent")]) == ["_yaml", "dateutil", "six", "yaml"]


def test_an_installed_package_brings_its_public_submodules(tmp_path: Path) -> None:
    """dateutil's tz and parser are candidates after dateutil; its tests and private modules are not."""
    info = tmp_path / "python_dateutil-2.9.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("dateutil\n")
    package = tmp_path / "dateutil"
    (package / "tz").mkdir(parents=True)
    (package / "tests").mkdir()
    for name in ("__init__.py", "parser.py", "_common.py", "tz/__init__.py", "tests/__init__.py"):
        (package / name).write_text("")
    assert candidates([str(tmp_path)], skip=set())[:3] == ["dateutil", "dateutil.parser", "dateutil.tz"]
    assert "dateutil.tests" not in candidates([str(tmp_path)], skip=set())
    assert "dateutil" not in candidates([str(tmp_path)], skip={"dateutil"})


def test_candidates_skip_the_trees_names_and_private_ones(tmp_path: Path) -> None:
    """The parent tries the image's names then the common standard modules, never a shadowed or private one."""
    info = tmp_path / "PyYAML-6.0.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("_yaml\nyaml\n")
    names = candidates([str(tmp_path)], skip={"random", "json"})
    assert names[0] == "yaml" and "_yaml" not in names
    assert "random" not in names and "json" not in names and "re" in names
    assert set(names) == {"yaml", *STDLIB} - {"random", "json"}


@given(st.sets(st.sampled_from(STDLIB)))
def test_no_skipped_name_is_ever_a_candidate(skip: set[str]) -> None:
    """Whatever the tree shadows, no candidate is one of its names."""
    assert not set(candidates([], skip)) & skip
