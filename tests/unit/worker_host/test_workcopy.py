"""Work copy modes without Docker: which mode a sandbox asks for, the seccomp profile each mode gives
its containers (Docker's default, vendored verbatim, plus our rules), what the host's and the
engine's settings refuse, how a report's mode reaches the observation, and how the card sums it up."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gate.core.card.stamp import work_copy_facts
from gate.core.errors import UsageError
from gate.core.suite.trial import Observation, WorkCopy
from gate.core.testing import make_spec
from gate.io.hostsettings import WORK_COPY_ENV, HostSettings
from worker.host import workcopy
from worker.host.container import report_observation

VENDORED_SHA256 = "e5e91f884647e7332b3f89280777752f563df4f1372a186f14ddb7bf2f55cf61"


def test_the_vendored_profile_is_dockers_default_verbatim():
    """default.json is byte for byte the file its README names (our rule is added in code, never to the file)."""
    assert hashlib.sha256(workcopy.PROFILE.read_bytes()).hexdigest() == VENDORED_SHA256
    assert VENDORED_SHA256 in (workcopy.PROFILE.parent / "README.md").read_text()
    assert (workcopy.PROFILE.parent / "LICENSE").read_text().lstrip().startswith("Apache License")


PERSONALITY = {
    "names": ["personality"],
    "action": "SCMP_ACT_ALLOW",
    "args": [{"index": 0, "value": 0x0040000, "op": "SCMP_CMP_EQ"}],
}


def test_the_overlay_profile_adds_exactly_two_rules_and_is_never_unconfined():
    """The overlay profile is Docker's default plus personality(ADDR_NO_RANDOMIZE) and one allow rule for
    mount, umount2 and unshare, and nothing else."""
    default = json.loads(workcopy.PROFILE.read_text())
    ours = json.loads(workcopy.seccomp_profile(WorkCopy.OVERLAY))
    assert ours["syscalls"][:-2] == default["syscalls"]
    assert {k: v for k, v in ours.items() if k != "syscalls"} == {k: v for k, v in default.items() if k != "syscalls"}
    assert ours["defaultAction"] == "SCMP_ACT_ERRNO"
    personality, rule = ours["syscalls"][-2:]
    assert {k: personality[k] for k in PERSONALITY} == PERSONALITY
    assert sorted(rule["names"]) == ["mount", "umount2", "unshare"] and rule["action"] == "SCMP_ACT_ALLOW"
    assert rule["args"] == [] and rule["includes"] == {} and rule["excludes"] == {}


def test_the_copy_profile_adds_only_the_personality_rule():
    """Copy mode's profile is Docker's default plus personality(ADDR_NO_RANDOMIZE) alone: no mount or unshare."""
    default = json.loads(workcopy.PROFILE.read_text())
    ours = json.loads(workcopy.seccomp_profile(WorkCopy.COPY))
    assert ours["syscalls"][:-1] == default["syscalls"]
    assert {k: ours["syscalls"][-1][k] for k in PERSONALITY} == PERSONALITY
    assert ours["syscalls"][-1]["includes"] == {} and ours["syscalls"][-1]["excludes"] == {}


def test_security_options_per_mode():
    """Each mode passes its own profile (never unconfined) and keeps no-new-privileges."""
    for mode in WorkCopy:
        options = workcopy.security_options(mode)
        assert options == ["no-new-privileges", f"seccomp={workcopy.seccomp_profile(mode)}"]
        assert not any("unconfined" in option for option in options)
    assert workcopy.seccomp_profile(WorkCopy.COPY) != workcopy.seccomp_profile(WorkCopy.OVERLAY)


def test_the_option_wins_over_the_environment_and_copy_says_why(monkeypatch):
    """PROBEGATE_WORK_COPY=copy forces copy mode with its reason; a sandbox option overrides the variable."""
    monkeypatch.setattr(workcopy, "host_refusal", lambda: None)
    assert workcopy.wanted() == (WorkCopy.OVERLAY, "")
    setting = HostSettings.from_env({WORK_COPY_ENV: "copy"}).work_copy
    assert workcopy.wanted(None, setting) == (WorkCopy.COPY, "forced by PROBEGATE_WORK_COPY=copy")
    assert workcopy.wanted("overlay", setting) == (WorkCopy.OVERLAY, "")
    assert workcopy.wanted("copy") == (WorkCopy.COPY, "forced by the sandbox's work_copy option")
    with pytest.raises(UsageError, match="must be 'overlay' or 'copy'"):
        workcopy.wanted(None, "tmpfs")


def test_a_host_that_refuses_overlay_gets_copy_mode_with_the_reason(monkeypatch):
    """Where the host's settings refuse overlay mode, an overlay request becomes copy mode naming the setting."""
    monkeypatch.setattr(workcopy, "host_refusal", lambda: "user namespaces are disabled")
    assert workcopy.wanted("overlay") == (WorkCopy.COPY, "user namespaces are disabled")


@pytest.mark.parametrize(
    ("files", "expect"),
    [
        ({}, None),
        ({"filesystems": "nodev\ttmpfs\nnodev\toverlay\n"}, None),
        ({"filesystems": "nodev\ttmpfs\n"}, "this kernel has no overlayfs"),
        ({"sys/user/max_user_namespaces": "0\n"}, "user namespaces are disabled (user.max_user_namespaces=0)"),
        ({"sys/kernel/unprivileged_userns_clone": "0"}, "unprivileged user namespaces are disabled"),
        ({"sys/kernel/apparmor_restrict_unprivileged_userns": "1"}, "AppArmor restricts unprivileged"),
        ({"sys/user/max_user_namespaces": "15000", "sys/kernel/unprivileged_userns_clone": "1"}, None),
    ],
)
def test_host_refusal_reads_the_kernels_settings(tmp_path: Path, files: dict[str, str], expect: str | None):
    """Disabled user namespaces, AppArmor's restriction or a kernel without overlayfs refuse; absent settings do not."""
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = workcopy.host_refusal(tmp_path)
    assert found == expect if expect is None else found.startswith(expect)


def test_an_engine_confining_with_apparmor_refuses_overlay():
    """docker info's name=apparmor means docker-default, which denies mount; seccomp alone refuses nothing."""
    assert workcopy.engine_refusal(["name=seccomp,profile=default"]) is None
    assert "AppArmor" in workcopy.engine_refusal(["name=apparmor", "name=seccomp,profile=default"])


SPEC = make_spec(0)
REPORT = {
    "exit_code": 0,
    "signal": None,
    "timed_out": False,
    "oom_killed": False,
    "duration_s": 0.1,
    "rusage_user_s": 0.0,
    "rusage_sys_s": 0.0,
    "max_rss_kb": 1,
    "canary_seen": False,
    "stdout": {"data_b64": "", "length": 0, "sha256": "0" * 64},
    "stderr": {"data_b64": "", "length": 0, "sha256": "0" * 64},
    "writes": [],
}


def test_the_supervisors_reason_wins_over_the_hosts():
    """A supervisor that fell back says why; a container the host asked for copy carries the host's reason."""
    fell_back = {**REPORT, "work_copy": "copy", "work_copy_note": "no user and mount namespace of our own"}
    obs = report_observation(SPEC, fell_back, image_id="i", worker_id="w")
    assert obs.work_copy is WorkCopy.COPY and obs.work_copy_note == "no user and mount namespace of our own"
    forced = {**REPORT, "work_copy": "copy", "work_copy_note": ""}
    obs = report_observation(SPEC, forced, image_id="i", worker_id="w", work_copy_note="forced")
    assert obs.work_copy_note == "forced"
    ran = {**REPORT, "work_copy": "overlay", "work_copy_note": ""}
    overlay = report_observation(SPEC, ran, image_id="", worker_id="")
    assert overlay.work_copy is WorkCopy.OVERLAY and overlay.work_copy_note == ""


def _obs(mode: WorkCopy | None, note: str = "") -> Observation:
    return Observation.of(SPEC, work_copy=mode, work_copy_note=note)


def test_the_card_says_which_mode_ran_and_why_copy_did():
    """One mode is named, two are mixed, none is None; each distinct copy reason is one harness event."""
    assert work_copy_facts([_obs(WorkCopy.OVERLAY)] * 3) == ("overlay", ())
    assert work_copy_facts([_obs(None)]) == (None, ())
    mode, events = work_copy_facts([_obs(WorkCopy.OVERLAY), _obs(WorkCopy.COPY, "why"), _obs(WorkCopy.COPY, "why")])
    assert mode == "mixed" and [(e.kind, e.detail) for e in events] == [("work_copy", "copy mode: why")]
    assert work_copy_facts([_obs(WorkCopy.COPY, "forced"), _obs(None)])[0] == "copy"


def test_a_sandbox_refuses_an_unknown_mode_when_it_is_made(monkeypatch):
    """A mistyped PROBEGATE_WORK_COPY is a usage error when the sandbox is built, before any container."""
    from worker.host.sandboxes.docker import DockerSandbox

    with pytest.raises(UsageError, match="PROBEGATE_WORK_COPY"):
        DockerSandbox(client=object(), host=HostSettings.from_env({WORK_COPY_ENV: "overlayfs"}))
