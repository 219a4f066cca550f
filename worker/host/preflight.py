"""Preflight: before a worker takes trials, prove on this engine and image that probes see the
frozen instant (also in a child that scrubbed LD_PRELOAD), that sleeps and timers return, that
the network is unreachable, and that a probe cannot make a namespace of its own. A failed
preflight is a harness error with the reason. It also proves which work copy mode this kernel and
engine give (worker/host/workcopy.py): where overlay was wanted but the container copied, the
findings say why and the sandbox asks its later containers for copy mode.

A derived (project) image is also checked statically first: it must not set the environment
the supervisor or the probe would inherit (PYTHONPATH, LD_*, FAKETIME*), run as another user,
wrap our command in an entrypoint, or declare volumes (writable places the fs diff never sees).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

import docker

from gate.core.errors import GateError, ImageError, SandboxError
from gate.core.suite.plan import trial_seed
from gate.core.suite.sandbox import Sandbox
from gate.core.suite.trial import ClockSpec, TrialSpec, WorkCopy
from gate.io.fixtures import seal_tree
from gate.io.snapshot import LocalInputs
from worker.host.engine import image_attrs

INSTANT = datetime(2026, 3, 1, tzinfo=UTC)

PROBE = r"""
import asyncio, ctypes, json, os, socket, subprocess, sys, threading, time
out = {"time": time.time()}
scrubbed = {k: v for k, v in os.environ.items() if not k.startswith(("LD_PRELOAD", "FAKETIME"))}
child = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], env=scrubbed,
                       capture_output=True, text=True, timeout=10)
out["child_time"] = float(child.stdout or "nan")
time.sleep(0.05)
fired = threading.Event()
threading.Timer(0.05, fired.set).start()
out["timer"] = fired.wait(5)
asyncio.run(asyncio.sleep(0.05))
out["asyncio"] = True
for key, target in (("tcp", ("1.1.1.1", 53)), ("loopback", ("127.0.0.1", 6379))):
    try:
        socket.create_connection(target, timeout=1).close()
        out[key] = "connected"
    except OSError as exc:
        out[key] = f"refused: {exc.strerror or exc}"
try:
    socket.getaddrinfo("example.com", 80)
    out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = f"refused: {exc.strerror or exc}"
try:
    out["preload"] = open("/etc/ld.so.preload").read().strip()
except OSError as exc:
    out["preload"] = f"unreadable: {exc.strerror or exc}"
libc = ctypes.CDLL(None, use_errno=True)
for key, flags in (("unshare", 0x10000000 | 0x00020000), ("unshare_mount", 0x00020000)):  # NEWUSER, NEWNS
    out[key] = "done" if libc.unshare(flags) == 0 else f"refused: {os.strerror(ctypes.get_errno())}"
print(json.dumps(out))
"""

# What a derived image may set in its environment: the base's own keys, and nothing the
# interpreter, the dynamic loader or libfaketime would act on.
ALLOWED_ENV = {"PATH": None, "FAKETIME_DONT_FAKE_MONOTONIC": "1", "PYTHONDONTWRITEBYTECODE": None, "LANG": None}
CLOCK_REFUSED = "clock preflight"  # how the supervisor words a batch it refused for the clock (worker/box)
SANDBOX_USERS = ("65534:65534", "65534", "nobody", "nobody:nogroup")


def image_config_problems(attrs: dict) -> list[str]:
    """What in an image's configuration (docker inspect data) would let it reach the supervisor or the
    probe around the sandbox's rules; empty when nothing does."""
    config = attrs.get("Config") or {}
    problems = []
    for item in config.get("Env") or []:
        key, _, value = item.partition("=")
        if key not in ALLOWED_ENV:
            problems.append(f"it sets {key} in its environment")
        elif ALLOWED_ENV[key] is not None and value != ALLOWED_ENV[key]:
            problems.append(f"it sets {key}={value}, not {ALLOWED_ENV[key]}")
    if (config.get("User") or "root") not in SANDBOX_USERS:
        problems.append(f"it runs as {config.get('User') or 'root'}, not 65534:65534 (nobody)")
    if config.get("Entrypoint"):
        problems.append(f"it has an entrypoint {config['Entrypoint']}, which would wrap the supervisor")
    if config.get("Volumes"):
        problems.append(f"it declares volumes {sorted(config['Volumes'])}, writable places the fs diff does not watch")
    return problems


def preflight(
    sandbox: Sandbox, *, deadline_s: float = 20.0, refuse: type[GateError] = SandboxError
) -> dict[str, object]:
    """Run the preflight probe once; returns its findings. A probe that cannot run is a SandboxError;
    what it found wrong raises `refuse` (ImageError for a project image: its definition's fault)."""
    image_id = sandbox.image_id()
    with tempfile.TemporaryDirectory(prefix="probegate-preflight-") as tmp:
        tree = Path(tmp)
        (tree / "probe.py").write_text(PROBE, encoding="utf-8")
        fixture = b"{}"
        digest = hashlib.sha256(fixture).hexdigest()
        with LocalInputs(tree, {digest: fixture}) as inputs:
            run_id = f"preflight-{uuid.uuid4().hex[:12]}"
            spec = TrialSpec(
                run_id=run_id,
                property_id="preflight",
                trial_index=0,
                seed=trial_seed(run_id, "preflight", 0),
                probe_argv=("python3", "probe.py"),
                tree_digest=seal_tree(inputs.snapshot).digest,
                fixture_path="preflight.json",
                fixture_digest=digest,
                deadline_s=deadline_s,
                clock=ClockSpec(frozen_at=INSTANT),
            )
            (obs,) = sandbox.run_batch([spec], inputs)
    if obs.fault and CLOCK_REFUSED in obs.fault:
        # The supervisor's own clock check refused the image before the probe ran: the image's doing.
        raise refuse(f"preflight failed: {obs.fault.removeprefix('supervisor: ')}")
    if obs.fault or obs.timed_out or obs.exit_code != 0:
        why = obs.fault or ("timed out" if obs.timed_out else obs.stderr.data.decode(errors="replace")[-300:])
        raise SandboxError(f"preflight probe failed: {why}")
    found = json.loads(obs.stdout.data)
    problems = []
    for key in ("time", "child_time"):
        if abs(found[key] - INSTANT.timestamp()) > 5:
            problems.append(f"{key} reads {found[key]:.0f}, not the frozen {INSTANT.timestamp():.0f}")
    if "libfaketime" not in str(found.get("preload")):
        problems.append(f"/etc/ld.so.preload does not load libfaketime ({str(found.get('preload'))[:80]!r})")
    if not found.get("timer"):
        problems.append("threading.Timer did not fire under the frozen clock")
    for key in ("tcp", "loopback", "dns"):
        if not str(found[key]).startswith("refused"):
            problems.append(f"network is reachable ({key}: {found[key]})")
    for key in ("unshare", "unshare_mount"):
        if not str(found[key]).startswith("refused"):
            problems.append(f"a probe can make namespaces of its own ({key}: {found[key]})")
    found["work_copy"] = obs.work_copy.value if obs.work_copy else None
    found["work_copy_note"] = obs.work_copy_note
    if obs.work_copy is WorkCopy.COPY and obs.work_copy_note and hasattr(sandbox, "use_copy"):
        sandbox.use_copy(obs.work_copy_note)  # this engine cannot give overlay mode: stop asking
    if problems:
        raise refuse("preflight failed: " + "; ".join(problems))
    return {"image_id": image_id, **found, "duration_s": round(obs.duration_s, 3)}


def prove_image(client: docker.DockerClient, image_id: str) -> dict[str, object]:
    """Check a project image before any trial runs in it: its configuration (image_config_problems),
    then the preflight probe inside it. What either finds wrong is an ImageError; nothing ran."""
    from worker.host.sandboxes.docker import DockerSandbox  # the sandbox module is heavy; only provers need it

    attrs = image_attrs(client, image_id)
    if attrs is None:
        raise SandboxError(f"image {image_id[:19]} is not on this engine")
    problems = image_config_problems(attrs)
    if problems:
        raise ImageError("the preflight refuses this image: " + "; ".join(problems))
    return preflight(DockerSandbox(client, image=image_id), refuse=ImageError)
