"""The UI in a real browser: headless Chromium (the system package) driven by Selenium against
``rayform ui`` itself over the demo catalog. Each test saves a screenshot of its page (the
folder is printed at the end of the run: ``$RAYFORM_UI_SCREENSHOTS``, else test-artifacts/ui)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WAIT_S = 60

# The current frame of a video or image element, drawn onto a canvas: its mean brightness and
# a checksum of a coarse grid of pixels (to tell two frames apart).
FRAME_PIXELS = """
const el = arguments[0];
const w = el.videoWidth || el.naturalWidth, h = el.videoHeight || el.naturalHeight;
if (!w || !h) return null;
const canvas = document.createElement("canvas");
canvas.width = w; canvas.height = h;
const ctx = canvas.getContext("2d");
ctx.drawImage(el, 0, 0, w, h);
const data = ctx.getImageData(0, 0, w, h).data;
let sum = 0, hash = 0;
for (let i = 0; i < data.length; i += 4) sum += (data[i] + data[i + 1] + data[i + 2]) / 3;
for (let y = 0; y < h; y += 8) for (let x = 0; x < w; x += 8) {
  const i = (y * w + x) * 4;
  hash = (hash * 31 + (data[i] >> 4) * 7 + (data[i + 1] >> 4) * 3 + (data[i + 2] >> 4)) >>> 0;
}
return {mean: sum / (w * h), hash: hash, width: w, height: h};
"""


def _wait(browser: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S, poll_frequency=0.2).until(condition, message=what)


def _open(browser: Any, url: str) -> None:
    browser.get(url)
    _wait(browser, lambda b: b.execute_script("return document.readyState") == "complete",
          f"{url} did not finish loading")


def _shot(browser: Any, screenshots: Path, name: str) -> None:
    browser.save_screenshot(str(screenshots / f"{name}.png"))


def _find(browser: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return _wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, selector),
                 f"no element {selector!r}")


def test_dataset_list_shows_demo(browser: Any, server_url: str, screenshots: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#datasets td a")]
    _shot(browser, screenshots, "datasets")
    assert "demo" in names and "curated" in names


def test_dataset_page_shows_segments_and_statistics(browser: Any, server_url: str,
                                                    screenshots: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/datasets/demo")
    rows = browser.find_elements(By.CSS_SELECTOR, "#segments tbody tr")
    assert len(rows) == 2
    stats = _find(browser, "#statistics-table")
    assert len(stats.find_elements(By.CSS_SELECTOR, "tbody tr")) == 14
    _shot(browser, screenshots, "dataset")


def _video(browser: Any) -> Any:
    from selenium.webdriver.common.by import By

    _wait(browser, lambda b: b.execute_script(
        "const v = document.querySelector('video.cam-video'); return v && v.readyState >= 2"),
        "the H.264 camera's video element never reached readyState >= 2 (HAVE_CURRENT_DATA)")
    return browser.find_element(By.CSS_SELECTOR, "video.cam-video")


def _seeked_to(browser: Any, video: Any, seconds: float) -> None:
    _wait(browser, lambda b: not b.execute_script("return arguments[0].seeking", video)
          and abs(b.execute_script("return arguments[0].currentTime", video) - seconds) < 0.02
          and b.execute_script("return arguments[0].readyState", video) >= 2,
          f"the video did not seek to {seconds} s")


def test_segment_page_plays_both_cameras_and_draws_the_joints(
        browser: Any, server_url: str, screenshots: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/datasets/demo/segments/episode_000")
    video = _video(browser)
    frame = browser.execute_script(FRAME_PIXELS, video)
    source = browser.execute_script("return arguments[0].currentSrc", video)
    print(f"H.264 camera played from {source} ({'transcoded' if 'webm' in source else 'remuxed'})")
    assert frame["width"] == 224 and frame["mean"] > 30, f"the video frame is black: {frame}"

    image = _find(browser, "img.cam-image")
    _wait(browser, lambda b: b.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", image),
        "the JPEG camera's image never loaded")
    picture = browser.execute_script(FRAME_PIXELS, image)
    assert picture["width"] == 224 and picture["mean"] > 30

    plot = browser.find_element(By.CSS_SELECTOR,
                                'figure.plot[data-column="/joints/position:Scalars:scalars"]')
    paths = plot.find_elements(By.CSS_SELECTOR, "svg.signal path")
    assert len(paths) == 7
    box = browser.execute_script("const b = arguments[0].getBBox(); return [b.width, b.height]",
                                 paths[0])
    assert box[0] > 800 and box[1] > 10, f"the joint line is not drawn across the plot: {box}"
    _shot(browser, screenshots, "segment")


def test_a_browser_without_the_codec_gets_the_vp9_transcode(browser: Any, server_url: str,
                                                            screenshots: Path) -> None:
    # this Chromium plays H.264; make it say it does not, before the page's scripts run
    script = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
        "const real = HTMLMediaElement.prototype.canPlayType;"
        "HTMLMediaElement.prototype.canPlayType = function (type) {"
        "  return type.includes('avc1') ? '' : real.call(this, type); };")})
    try:
        _open(browser, server_url + "/datasets/demo/segments/episode_001")
        video = _video(browser)
        source = browser.execute_script("return arguments[0].currentSrc", video)
        assert "format=webm" in source
        frame = browser.execute_script(FRAME_PIXELS, video)
        assert frame["width"] == 224 and frame["mean"] > 30, f"the VP9 frame is black: {frame}"
        browser.execute_script(
            "const s = document.getElementById('cursor'); s.value = '1';"
            "s.dispatchEvent(new Event('input', {bubbles: true}));")
        _seeked_to(browser, video, 1.0 + 0.0005)
        assert browser.execute_script(FRAME_PIXELS, video)["hash"] != frame["hash"]
        _shot(browser, screenshots, "segment-vp9-fallback")
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                                {"identifier": script["identifier"]})


@pytest.mark.realdata
def test_real_av1_video_asset_plays(browser: Any, server_url: str, ui_catalog: str,
                                    screenshots: Path) -> None:
    from rayform.catalog import Catalog

    if "g1" not in Catalog.open(ui_catalog).dataset_names():
        pytest.skip("../shared/realdata/unitree-g1-lerobot-v21 is absent")
    _open(browser, server_url + "/datasets/g1/segments/episode_000029")
    video = _video(browser)
    frame = browser.execute_script(FRAME_PIXELS, video)
    assert frame["width"] == 640 and frame["mean"] > 20, f"the AV1 frame is black: {frame}"
    browser.execute_script(
        "const s = document.getElementById('cursor'); s.value = '3';"
        "s.dispatchEvent(new Event('input', {bubbles: true}));")
    _seeked_to(browser, video, 3.0 + 0.0005)
    assert browser.execute_script(FRAME_PIXELS, video)["hash"] != frame["hash"]
    _shot(browser, screenshots, "real-av1-segment")


def test_moving_the_cursor_moves_the_cameras(browser: Any, server_url: str,
                                             screenshots: Path) -> None:
    _open(browser, server_url + "/datasets/demo/segments/episode_000")
    video = _video(browser)
    image = _find(browser, "img.cam-image")
    _seeked_to(browser, video, 0.0005)
    before = browser.execute_script(FRAME_PIXELS, video)
    # the slider as a person moves it: its value, then its input event
    browser.execute_script(
        "const s = document.getElementById('cursor'); s.value = '1.5';"
        "s.dispatchEvent(new Event('input', {bubbles: true}));")
    _seeked_to(browser, video, 1.5 + 0.0005)
    _wait(browser, lambda b: image.get_attribute("data-row") == "45"
          and b.execute_script("return arguments[0].complete", image),
          "the JPEG camera did not move to frame 45 (1.5 s at 30 Hz)")
    after = browser.execute_script(FRAME_PIXELS, video)
    assert after["hash"] != before["hash"], "the video shows the same picture after the move"
    assert "frame=45" in image.get_attribute("src").replace("row=", "frame=")
    x = browser.execute_script(
        "return Number(document.querySelector('svg.signal .cursor-line').getAttribute('x1'))")
    assert x == pytest.approx(1.5 / 1.99 * 900, abs=2)  # the plots' cursor moved too
    _shot(browser, screenshots, "segment-cursor")


def test_sql_page_counts_the_segments(browser: Any, server_url: str, screenshots: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/sql")
    box = _find(browser, "#query")
    box.clear()
    box.send_keys("SELECT count(*) FROM demo.segments")
    browser.find_element(By.ID, "run").click()
    cell = _find(browser, "#result tbody td")
    assert cell.text == "2"
    _shot(browser, screenshots, "sql")


def test_curated_dataset_shows_its_findings_as_ranges(
        browser: Any, server_url: str, screenshots: Path, nan_span_s: tuple[float, float]) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/datasets/curated")
    verdict = _find(browser, "#segments td.verdict")
    assert verdict.text == "exclude"
    _find(browser, "#statistics-table")  # NaN rows and all
    _shot(browser, screenshots, "curated-dataset")
    _open(browser, server_url + "/datasets/curated/segments/nan_episode")
    band = _find(browser, "rect.note-range.finding")
    box = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "const t = document.getElementById('notes-track').getBoundingClientRect();"
        "return [(r.left - t.left) / t.width, (r.right - t.left) / t.width]", band)
    duration = 1.99
    assert box[0] == pytest.approx(nan_span_s[0] / duration, abs=0.02)
    assert box[1] == pytest.approx(nan_span_s[1] / duration, abs=0.02)
    assert browser.find_elements(By.CSS_SELECTOR, "svg.signal rect.note-band.error")
    _shot(browser, screenshots, "curated-segment")


def test_save_a_slice_from_the_filter(browser: Any, server_url: str, screenshots: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, server_url + "/datasets/demo?where=%22property%3Asite%22+%3D+%27lab-a%27")
    browser.find_element(By.ID, "save-slice").click()
    prompt = _wait(browser, lambda b: b.switch_to.alert, "no prompt for the slice's name")
    prompt.send_keys("lab a only")
    prompt.accept()
    result = _find(browser, "#slice-result")
    _wait(browser, lambda b: result.text.startswith("saved slc_"), "the slice was not saved")
    slice_id = result.text.split()[1]
    _open(browser, server_url + "/slices")
    assert slice_id in browser.find_element(By.ID, "slices").text
    _shot(browser, screenshots, "slices")
