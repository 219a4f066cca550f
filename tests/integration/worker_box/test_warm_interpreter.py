"""Warm-interpreter trials on the real engine: nothing of the patched tree runs in the warm parent or
leaks into a later trial, the tree's modules win as in a fresh interpreter, hash orders differ across
parents, and a probe that attacks its parent breaks only its own trial."""

from __future__ import annotations

import ast

import pytest

from gate.core.suite.trial import FaultOrigin, Interpreter, Observation
from worker.box.warmclient import PARENT_TRIALS

pytestmark = pytest.mark.integration


@pytest.fixture(params=["fresh", "warm"])
def interpreter(request) -> str:
    """Each probe here runs in both modes: what the warm child sees must be what a fresh one sees."""
    return request.param


@pytest.fixture(autouse=True)
def _no_leftovers(leftovers):
    yield
    assert leftovers() == [], "a container of this test's run remains"


# Each planted file records that it ran, in which process, on `builtins` (which a forked child inherits):
# had the parent run it, every child would start with the record.
RECORD = "import builtins, os\nbuiltins.__dict__.setdefault('planted', []).append(({name!r}, os.getpid()))\n"
PLANTED = {
    "yaml.py": RECORD.format(name="yaml"),
    "random.py": RECORD.format(name="random") + "def random():\n    return 'tree'\n",
    "json/__init__.py": RECORD.format(name="json") + "def dumps(value):\n    return 'tree json'\n",
    "sitecustomize.py": RECORD.format(name="sitecustomize"),
    "usercustomize.py": RECORD.format(name="usercustomize"),
    "evil.pth": "import builtins; builtins.planted_pth = True\n",
    "lib/evil.pth": "import builtins; builtins.planted_pth = True\n",
}
ISOLATION = """
    import builtins, os, sys
    before = list(getattr(builtins, "planted", []))
    import random, json, yaml
    mine = [name for name, pid in builtins.planted if pid == os.getpid()]
    tree = sorted(m for m in ("random", "json", "yaml") if sys.modules[m].__file__.startswith("/work/"))
    print(repr({"before": before, "mine": sorted(mine), "random": random.random(), "json": json.dumps(1),
                "pth": hasattr(builtins, "planted_pth"), "tmp": sorted(os.listdir("/tmp")), "modules": tree}))
"""


def result(obs: Observation) -> dict:
    assert obs.fault is None and obs.exit_code == 0, (obs.fault, obs.stderr.data)
    return ast.literal_eval(obs.stdout.data.decode())


def test_planted_modules_run_only_in_the_probe_and_never_leak(run_batch, make_trial, interpreter):
    """yaml.py, random.py, a json/ package, sitecustomize, usercustomize and .pth files in the tree never
    run before the probe (not in the parent, not from an earlier trial); the probe imports the tree's."""
    first, inputs = make_trial(ISOLATION, extra=PLANTED, deadline_s=5)
    specs = [first.model_copy(update={"trial_index": i}) for i in range(3)]
    observed = run_batch(specs, inputs)
    for obs in observed:
        assert obs.interpreter is Interpreter(interpreter)
        assert result(obs) == {
            "before": [],
            "mine": ["json", "random", "yaml"],
            "random": "tree",
            "json": "tree json",
            "pth": False,
            "tmp": [],
            "modules": ["json", "random", "yaml"],
        }


def test_pythonpath_sitecustomize_runs_in_the_probe_as_in_a_fresh_interpreter(run_batch, make_trial):
    """A sitecustomize on the suite's pythonpath runs in the probe's process in both modes, before the probe."""
    probe = "import builtins, os\nprint([n for n, pid in getattr(builtins, 'planted', []) if pid == os.getpid()])\n"
    spec, inputs = make_trial(probe, extra={"src/sitecustomize.py": RECORD.format(name="site")}, deadline_s=5)
    [obs] = run_batch([spec.model_copy(update={"pythonpath": ("src",)})], inputs)
    assert obs.fault is None and obs.stdout.data == b"['site']\n", (obs.fault, obs.stderr.data)


ORDER = """
    print(",".join({"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
                    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"}))
"""


@pytest.mark.parametrize("timings", [True])
def test_set_order_differs_across_parents_and_each_trial_says_its_seed(
    run_batch, make_trial, interpreter, sandbox, monkeypatch
):
    """Warm trials record their parent's PYTHONHASHSEED and time their fork, trials of one parent share a
    set order and the parents (replaced every PARENT_TRIALS trials) give different ones, while fresh
    trials record no seed and no fork."""
    steps: list[dict] = []
    observe = sandbox._observation

    def keep_steps(spec, image_id, report, note=""):
        steps.append(report.get("steps_s") or {})
        return observe(spec, image_id, report, note)

    monkeypatch.setattr(sandbox, "_observation", keep_steps)
    first, inputs = make_trial(ORDER, deadline_s=5)
    count = 2 * PARENT_TRIALS + 2
    observed = run_batch([first.model_copy(update={"trial_index": i}) for i in range(count)], inputs)
    assert all(o.fault is None and o.exit_code == 0 for o in observed)
    assert len(steps) == count
    if interpreter == "fresh":
        assert {o.hash_seed for o in observed} == {None}
        assert not any("fork" in step for step in steps)
        return
    # The fork (to the child about to run the probe) is part of the trial's probe time, never more.
    assert all(0 < step["fork"] <= step["probe"] for step in steps), steps
    by_seed: dict[int, set[bytes]] = {}
    for obs in observed:
        assert obs.hash_seed is not None
        by_seed.setdefault(obs.hash_seed, set()).add(obs.stdout.data)
    assert len(by_seed) == 3  # 16 + 16 + 2 trials
    assert all(len(orders) == 1 for orders in by_seed.values())
    assert len({next(iter(orders)) for orders in by_seed.values()}) == 3


ATTACK = """
    import os, signal
    def read(path):
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            return "read"
        except OSError as exc:
            return type(exc).__name__
    parent = os.getppid()
    print(read(f"/proc/{parent}/mem"), read(f"/proc/{parent}/environ"), flush=True)
    if os.environ["PROBEGATE_TRIAL_INDEX"] == "1":
        os.kill(parent, signal.SIGKILL)
"""


@pytest.mark.parametrize("interpreter", ["warm"])
def test_a_probe_cannot_read_its_parent_and_killing_it_costs_its_own_trial(run_batch, make_trial, interpreter):
    """The warm parent's memory and environment are closed to its child; a child that kills the parent
    gets a fault of the patch's making, and the trials after it run in a new container as before."""
    first, inputs = make_trial(ATTACK, deadline_s=5)
    observed = run_batch([first.model_copy(update={"trial_index": i}) for i in range(4)], inputs)
    assert observed[0].fault is None and observed[0].stdout.data == b"PermissionError PermissionError\n"
    assert observed[1].fault_origin is FaultOrigin.PATCH and "warm parent" in (observed[1].fault or "")
    assert [o.fault for o in observed[2:]] == [None, None]


FIDELITY = {
    "probe.py": (
        "import sys\nprint(__name__, __file__, sys.argv, sys.path[0])\nfrom pkg import fail\nfail.now(sys.argv[1:])\n"
    ),
    "pkg/__init__.py": "",
    "pkg/fail.py": (
        "import sys\n"
        "def now(args):\n"
        "    if args == ['raise']:\n"
        "        raise ValueError('from the probe')\n"
        "    if args == ['message']:\n"
        "        sys.exit('a message')\n"
        "    sys.exit(int(args[0]) if args else 0)\n"
    ),
    "pkg/main.py": "import sys\nprint(__name__, sys.argv, sys.path[0])\n",
}


@pytest.mark.parametrize("interpreter", ["fresh"])
@pytest.mark.parametrize(
    "argv",
    [
        ("python3", "probe.py"),
        ("python3", "probe.py", "raise"),
        ("python3", "probe.py", "message"),
        ("python3", "probe.py", "300"),
        ("python3", "-m", "pkg.main", "x"),
    ],
)
def test_a_warm_child_exits_and_prints_as_a_fresh_interpreter(run_batch, make_trial, interpreter, argv) -> None:
    """The same probe, command line and fixture give byte-identical stdout and stderr and the same exit
    status in both modes: __name__, __file__, argv and sys.path[0], a traceback, sys.exit with a message
    or a number past 255, and `python3 -m`."""
    spec, inputs = make_trial(FIDELITY["probe.py"], extra={k: v for k, v in FIDELITY.items() if k != "probe.py"})
    fresh = spec.model_copy(update={"probe_argv": argv})
    warm = fresh.model_copy(update={"interpreter": Interpreter.WARM, "trial_index": 1})
    seen = run_batch([fresh], inputs) + run_batch([warm], inputs)
    assert [o.fault for o in seen] == [None, None]
    assert [o.interpreter for o in seen] == [Interpreter.FRESH, Interpreter.WARM]
    assert seen[0].exit_code == seen[1].exit_code
    assert seen[0].stdout.data == seen[1].stdout.data and seen[0].stderr.data == seen[1].stderr.data, (
        seen[0].stderr.data,
        seen[1].stderr.data,
    )


@pytest.mark.parametrize("interpreter", ["warm"])
def test_a_tree_of_more_names_than_a_command_line_holds_still_runs_warm(run_batch, make_trial, interpreter):
    """15,000 top-level modules in the tree (about 200 KB of names, past one argument's 128 KiB) reach
    the parent whole: the trial runs, and the tree's json.py among them still wins."""
    extra = {f"module_{i:05d}.py": "" for i in range(15_000)}
    extra["json.py"] = "def dumps(value):\n    return 'tree json'\n"
    spec, inputs = make_trial("import json\nprint(json.dumps(1))\n", extra=extra, deadline_s=10)
    [obs] = run_batch([spec], inputs)
    assert obs.fault is None and obs.stdout.data == b"tree json\n", (obs.fault, obs.stderr.data)
