"""Fixtures of the ``rayform ui`` tests: one demo catalog per session (the demo dataset, and a
``curated`` dataset whose curation finds a range), the app in process, and the real server with
a headless Chromium for the browser tests (skipped, saying why, where Chromium is absent)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette", reason="rayform ui needs rayform[ui] (starlette, uvicorn, jinja2)")
pytest.importorskip("av", reason="the demo's H.264 camera needs PyAV (rayform[video])")
pytest.importorskip("PIL", reason="the demo's JPEG camera needs Pillow (rayform[image])")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("RAYFORM_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("RAYFORM_CHROMEDRIVER", "/usr/bin/chromedriver"))
SCREENSHOTS_ENV = "RAYFORM_UI_SCREENSHOTS"
CURATED = "curated"
NAN_ROWS = (60, 90)  # rows of the curated episode whose joint 2 is NaN (a values.nonfinite range)
G1 = ROOT.parent / "shared" / "realdata" / "unitree-g1-lerobot-v21"  # LeRobot v2.1, AV1 assets
G1_DATASET = "g1"
SQL_TIMEOUT_S = 3.0  # the served UI's query timeout (tests/ui/test_server.py runs past it)


def screenshot_dir() -> Path:
    """Where the browser tests write their screenshots (``$RAYFORM_UI_SCREENSHOTS``, else
    ``test-artifacts/ui`` in the checkout, which git ignores)."""
    return Path(os.environ.get(SCREENSHOTS_ENV) or ROOT / "test-artifacts" / "ui")


def _curated_episode(path: Path) -> Path:
    """A 2 s, 100 Hz, 7-joint episode whose joint 2 is NaN on rows NAN_ROWS."""
    from rayform.catalog import RecordingWriter

    t = 1_767_225_600_000_000_000 + np.arange(200, dtype=np.int64) * 10_000_000
    position = np.sin(np.arange(200)[:, None] / 20.0 + np.arange(7)).astype(np.float32)
    position[NAN_ROWS[0]:NAN_ROWS[1], 2] = np.nan
    with RecordingWriter(path, recording_id="nan_episode") as rec:
        rec.set_properties(task="stack", success=False)
        timeline = {"real_time": t.astype("datetime64[ns]"), "frame_index": np.arange(200)}
        rec.log_scalars("/joints/position", timelines=timeline, values=position)
    return path


@pytest.fixture(scope="session")
def ui_catalog(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A catalog with the demo dataset (2 episodes of 2 s) and a curated dataset with a finding."""
    from rayform.catalog import Catalog
    from rayform.curation import curate
    from rayform.demo import DemoSpec, build_demo

    root = tmp_path_factory.mktemp("ui-catalog")
    url = str(root / "catalog")
    build_demo(url, DemoSpec(num_episodes=2, duration_s=2.0))
    catalog = Catalog.open(url)
    catalog.create_dataset("empty")
    curated = catalog.create_dataset(CURATED)
    curated.register(str(_curated_episode(root / "nan_episode.rfr"))).wait()
    curate(catalog.get_dataset(CURATED), video="off")
    if (G1 / "meta" / "info.json").is_file():  # real AV1 video assets, when the data is here
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "partial LeRobot dataset": 2 of its episodes
            catalog.create_dataset(G1_DATASET).register(str(G1)).wait()
    return url


@pytest.fixture(scope="session")
def nan_span_s() -> tuple[float, float]:
    """Where the curated episode's NaN run lies on its time axis (seconds from its start)."""
    return NAN_ROWS[0] / 100.0, NAN_ROWS[1] / 100.0


@pytest.fixture()
def client(ui_catalog: str, tmp_path: Path) -> Iterator[Any]:
    """The app in process (Starlette's TestClient), its video cache in ``tmp_path``."""
    from starlette.testclient import TestClient

    from rayform.ui import create_app

    with TestClient(create_app(ui_catalog, cache_dir=tmp_path / "cache")) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def server_url(ui_catalog: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``rayform ui`` itself, in a subprocess on a free port; its URL as it prints it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "RAYFORM_CACHE_DIR": str(tmp_path_factory.mktemp("ui-cache"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rayform.cli", "--catalog", ui_catalog, "ui", "--no-browser",
         "--port", "0", "--sql-timeout", str(SQL_TIMEOUT_S)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    lines = []
    url = None
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if found:
            url = found[1]
            break
    if url is None:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        raise AssertionError("rayform ui printed no URL:\n" + "".join(lines))
    # keep reading what it says (its warnings), so that a full pipe never blocks it
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    drain.start()
    yield url.rstrip("/")
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    drain.join(timeout=10)
    proc.stdout.close()


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.is_file():
            return (f"{path} is absent: install the system browser (apt-get install chromium "
                    f"chromium-driver; the {package} package), or set RAYFORM_CHROMIUM / "
                    "RAYFORM_CHROMEDRIVER")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[dev]'"
    return None


def ordinary_scheduling(pid: int) -> int:
    """Put every thread of process ``pid`` and of its descendants under the ordinary
    time-sharing policy (``SCHED_OTHER``); the number of threads moved.

    A process started under a real-time policy passes it to its children. Some sandboxes run a
    test session as ``SCHED_FIFO``: Chromium's renderers, which spin while they wait on each
    other, then held both cores of a 2-core machine, starving every other process of the
    session (a README example stalled for minutes after the browser tests had passed).
    """
    moved = 0
    tasks = Path(f"/proc/{pid}/task")
    children: set[int] = set()
    for task in tasks.iterdir() if tasks.is_dir() else ():
        try:
            if os.sched_getscheduler(int(task.name)) != os.SCHED_OTHER:
                os.sched_setscheduler(int(task.name), os.SCHED_OTHER, os.sched_param(0))
                moved += 1
            children.update(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return moved + sum(ordinary_scheduling(child) for child in children)


@pytest.fixture()
def time_shared() -> Any:
    """:func:`ordinary_scheduling`, for its own test."""
    return ordinary_scheduling


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through the system chromedriver (Selenium never downloads a driver),
    quit once the module's tests are done; its processes time-shared (see
    :func:`ordinary_scheduling`)."""
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1100", "--mute-audio", "--no-first-run",
                "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(arg)
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(service=service, options=options)
    if sys.platform == "linux" and os.sched_getscheduler(0) != os.SCHED_OTHER:
        ordinary_scheduling(service.process.pid)  # renderers forked later inherit the zygote's
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    folder = screenshot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pytest_terminal_summary(terminalreporter: Any) -> None:
    folder = screenshot_dir()
    if folder.is_dir() and any(folder.glob("*.png")):
        terminalreporter.write_line(f"rayform ui screenshots: {folder}")

