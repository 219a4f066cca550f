"""What the browser tests share (the HTML report's and `gate view`'s): the headless Chromium they drive and
the helpers that find and wait on its elements, the checks their mock runs judge, the hostile text a probe
echoes and how each part of it must read on the page, and a full-page screenshot kept in
$PROBEGATE_ARTIFACTS (CI) or the test's tmp_path. Selenium is imported where it is used: without it these
modules still load, so that the `chromium` fixture can skip (or fail under CI=true) like any missing service."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

ARTIFACTS_ENV = "PROBEGATE_ARTIFACTS"  # .ci/run sets it: where CI keeps the screenshots
WAIT_S = 15  # how long `wait_for` waits on a condition before the test fails

# Debian's packages (deploy/provision.sh installs them), named explicitly: Selenium Manager must not
# go looking for, or download, a browser or a driver.
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_ARGS = (
    "--headless=new",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--window-size=1280,900",
)
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


def start_chromium(unavailable: Callable[[str], NoReturn]) -> Any:
    """A headless Chromium WebDriver on the system browser and driver; `unavailable(reason)` when either is
    missing, Selenium is not installed or the browser does not start. The caller quits it."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not os.access(binary, os.X_OK):
            unavailable(f"{binary} is missing (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        unavailable(f"selenium is not installed: {exc}")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to start as root with its sandbox on
    with pytest.MonkeyPatch.context() as env:
        # With the driver's path given Selenium skips its manager; should a version call it anyway, offline.
        env.setenv("SE_OFFLINE", "true")
        try:
            return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
        except WebDriverException as exc:
            unavailable(f"headless Chromium did not start: {str(exc).splitlines()[0]}")


def by_css(parent: Any, selector: str) -> list[Any]:
    """The elements under `parent` (the browser or an element) that match the CSS `selector`."""
    from selenium.webdriver.common.by import By

    return parent.find_elements(By.CSS_SELECTOR, selector)


def one(parent: Any, selector: str) -> Any:
    """The one element under `parent` that matches `selector` (the test fails on none or several)."""
    found = by_css(parent, selector)
    assert len(found) == 1, selector
    return found[0]


def wait_for(browser: Any, condition: Callable[[Any], Any], timeout_s: float = WAIT_S) -> Any:
    """What `condition(browser)` first returns that is true, polled until `timeout_s` (then the test fails)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout_s).until(condition)
