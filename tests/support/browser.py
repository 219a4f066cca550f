"""What the browser tests share (the HTML report's and `gate view`'s): the checks their mock runs judge,
the hostile text a probe echoes and how each part of it must read on the page, and a full-page screenshot
kept in $PROBEGATE_ARTIFACTS (CI) or the test's tmp_path."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

ARTIFACTS_ENV = "PROBEGATE_ARTIFACTS"  # .ci/run sets it: where CI keeps the screenshots
HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> \x1b[2J nul\x00 \u202eevil"
SHOWN = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\\x1b[2J", "nul\\x00", "\\u202eevil")

# The two properties both browser tests' suites end with: a fixed statistical rate and a contract row that
# echoes the hostile output into its detail.
BOTH_BROWSERS_PROPERTIES = """
[[property]]
id = "fixed_rate"
band = "statistical"
fixture = "input.json"
check = "checks:right_tool"
deadline_s = 1.0
trials = 10
min_hits = 8

[[property]]
id = "hostile_echo"
band = "contract"
fixture = "input.json"
check = "checks:echo"
deadline_s = 1.0
"""

CHECKS_PY = """\
from gate.core.checks import Trial


def right_tool(trial: Trial) -> bool:
    got = trial.stdout_json().get("tool")
    assert got == "lookup", f"chose {got}"
    return True


def echo(trial: Trial) -> bool:
    got = trial.stdout_json().get("echo")
    assert got == "fine", f"echoed {got}"
    return True
"""


def screenshot(browser: Any, name: str, tmp_path: Path) -> bytes:
    """A PNG of the whole page (beyond the window), written as NAME.png to the artifacts folder; its bytes."""
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = browser.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    png = base64.b64decode(shot["data"])
    folder = Path(os.environ[ARTIFACTS_ENV]) if os.environ.get(ARTIFACTS_ENV) else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return png
