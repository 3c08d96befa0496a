"""The UI over HTTP (Starlette's TestClient): every page's JSON twin, paging, filters, ranges,
read-only SQL, slices, and the refusals (unknown names are 404s with a message, never a path)."""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest

from rayform.catalog import Catalog, compute_statistics


def test_datasets_api_lists_the_demo_with_its_figures(client: Any, ui_catalog: str) -> None:
    body = client.get("/api/datasets").json()
    demo = {d["name"]: d for d in body["datasets"]}["demo"]
    table = Catalog.open(ui_catalog).get_dataset("demo").segment_table_arrow()
    assert demo["segments"] == 2
    assert demo["rows"] == sum(table.column("rerun_num_rows").to_pylist())
    assert demo["size_bytes"] == sum(table.column("rerun_size_bytes").to_pylist())
    assert demo["duration_s"] == pytest.approx(2 * 1.99, abs=0.05)  # 100 Hz joints, 2 s each
    assert demo["version"] == 1 and demo["last_change"].startswith("20")
    page = client.get("/")
    assert page.status_code == 200 and ">demo</a>" in page.text


def test_an_empty_dataset_has_pages_too(client: Any) -> None:
    summary = {d["name"]: d for d in client.get("/api/datasets").json()["datasets"]}["empty"]
    assert (summary["segments"], summary["rows"], summary["last_change"]) == (0, 0, None)
    body = client.get("/api/datasets/empty").json()
    assert (body["total"], body["rows"], body["pages"]) == (0, [], 1)
    assert client.get("/datasets/empty").status_code == 200
    assert client.get("/api/datasets/empty/statistics").json()["statistics"] == []


def test_segment_table_pages_sorts_and_filters(client: Any) -> None:
    first = client.get("/api/datasets/demo", params={"page_size": 1}).json()
    second = client.get("/api/datasets/demo", params={"page_size": 1, "page": 2}).json()
    assert (first["total"], first["pages"]) == (2, 2)
    assert [r["rerun_segment_id"] for r in first["rows"] + second["rows"]] == [
        "episode_000", "episode_001"]
    backwards = client.get("/api/datasets/demo", params={"sort": "property:site", "desc": "1"})
    assert [r["property:site"] for r in backwards.json()["rows"]] == ["lab-b", "lab-a"]
    only = client.get("/api/datasets/demo", params={"where": "\"property:site\" = 'lab-b'"}).json()
    assert only["total"] == 1 and only["rows"][0]["rerun_segment_id"] == "episode_001"
    html = client.get("/datasets/demo", params={"where": "\"property:site\" = 'lab-b'"})
    assert html.status_code == 200 and "episode_001" in html.text and "episode_000" not in html.text


@pytest.mark.parametrize(("params", "says"), [
    ({"where": "no_such_column = 1"}, "no_such_column"),
    ({"sort": "nope"}, "not a column"),
    ({"page": "0"}, "page must be 1 or more"),
    ({"page_size": "many"}, "whole number"),
])
def test_bad_table_queries_are_400_with_the_reason(client: Any, params: dict[str, str],
                                                   says: str) -> None:
    reply = client.get("/api/datasets/demo", params=params)
    assert reply.status_code == 400 and says in reply.json()["error"]
    assert client.get("/datasets/demo", params=params).status_code == 400


def test_curated_dataset_has_verdicts_and_findings_counts(client: Any) -> None:
    body = client.get("/api/datasets/curated").json()
    assert body["curated"] is True
    verdict = body["verdicts"]["nan_episode"]
    assert verdict["verdict"] == "exclude" and verdict["findings"] == {"error": 1}
    assert client.get("/api/datasets/demo").json()["curated"] is False
    stats = client.get("/api/datasets/curated/statistics").json()["statistics"]
    assert [row["count"] for row in stats] == [200] * 7


def test_statistics_are_the_figures_of_rayform_stats(client: Any, ui_catalog: str) -> None:
    body = client.get("/api/datasets/demo/statistics").json()
    expected = compute_statistics(Catalog.open(ui_catalog).get_dataset("demo")).dimension_table()
    assert len(body["statistics"]) == expected.num_rows == 14  # 2 columns x 7 joints
    for got, want in zip(body["statistics"], expected.to_pylist(), strict=True):
        assert (got["column"], got["dim"], got["count"]) == (want["column"], want["dim"],
                                                             want["count"])
        assert got["mean"] == pytest.approx(want["mean"]) and got["q99"] == pytest.approx(want["q99"])


def test_episode_api_has_cameras_signals_on_one_axis(client: Any) -> None:
    body = client.get("/api/datasets/demo/segments/episode_000").json()
    assert body["axis"]["timeline"] == "real_time"
    cameras = {c["entity"]: c for c in body["cameras"]}
    assert cameras["/cam0/rgb"]["kind"] == "image" and len(cameras["/cam0/rgb"]["times_s"]) == 60
    wrist = cameras["/wrist/rgb"]
    assert wrist["kind"] == "stream" and wrist["codec"] == "h264"
    assert wrist["times_s"][:2] == [0.0, pytest.approx(1 / 30, abs=1e-6)]
    signals = {s["column"]: s for s in body["signals"]}
    joints = signals["/joints/position:Scalars:scalars"]
    assert joints["samples"] == 200 and len(joints["names"]) == 7
    narrow = client.get("/api/datasets/demo/segments/episode_000", params={"width": 50}).json()
    narrow_joints = {s["column"]: s for s in narrow["signals"]}["/joints/position:Scalars:scalars"]
    assert len(narrow_joints["t_s"]) == 50 and narrow["plot_width"] == 50  # min/max per column
    assert max(max(r) for r in narrow_joints["high"]) == pytest.approx(
        max(max(r) for r in joints["high"]))
    assert client.get("/api/datasets/demo/segments/episode_000",
                      params={"width": 5}).status_code == 400
    assert "rayform --catalog" in body["view_command"] and "view demo episode_000" in \
        body["view_command"]


def test_episode_notes_are_ranges_on_the_axis(client: Any, nan_span_s: tuple[float, float]) -> None:
    notes = client.get("/api/datasets/curated/segments/nan_episode").json()["notes"]
    finding = next(n for n in notes if n["kind"] == "finding")
    assert finding["label"] == "values.nonfinite"
    assert finding["start_s"] == pytest.approx(nan_span_s[0], abs=0.011)
    assert finding["end_s"] == pytest.approx(nan_span_s[1], abs=0.011)
    html = client.get("/datasets/curated/segments/nan_episode").text
    assert 'class="note-range finding error"' in html


def test_jpeg_frames_are_served_as_stored(client: Any, ui_catalog: str) -> None:
    reply = client.get("/media/demo/episode_000/image", params={"entity": "/cam0/rgb", "row": 5})
    assert reply.status_code == 200 and reply.headers["content-type"] == "image/jpeg"
    data = Catalog.open(ui_catalog).get_dataset("demo").open_segment("episode_000")
    stored = data.column("/cam0/rgb:EncodedImage:blob", "real_time").values[5].as_py()[0]
    assert reply.content == stored
    assert client.get("/media/demo/episode_000/image",
                      params={"entity": "/cam0/rgb", "row": 999}).status_code == 404


def test_video_is_remuxed_without_transcoding_and_served_with_ranges(client: Any) -> None:
    import av

    params = {"entity": "/wrist/rgb"}
    whole = client.get("/media/demo/episode_000/video", params=params)
    assert whole.status_code == 200 and whole.headers["content-type"] == "video/mp4"
    assert whole.headers["accept-ranges"] == "bytes"
    part = client.get("/media/demo/episode_000/video", params=params,
                      headers={"range": "bytes=100-199"})
    assert part.status_code == 206 and len(part.content) == 100
    assert part.headers["content-range"] == f"bytes 100-199/{len(whole.content)}"
    assert part.content == whole.content[100:200]
    with av.open(io.BytesIO(whole.content)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        frames = list(container.decode(stream))
    assert len(frames) == 60
    assert float(frames[30].pts * stream.time_base) == pytest.approx(1.0, abs=1e-3)


def test_video_transcodes_to_vp9_when_asked(client: Any) -> None:
    import av

    reply = client.get("/media/demo/episode_000/video",
                       params={"entity": "/wrist/rgb", "format": "webm"})
    assert reply.status_code == 200 and reply.headers["content-type"] == "video/webm"
    with av.open(io.BytesIO(reply.content)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name in ("vp9", "libvpx-vp9")
        assert sum(1 for _ in container.decode(stream)) == 60


def test_sql_runs_read_only_with_downloads(client: Any) -> None:
    query = "SELECT count(*) AS n FROM demo.segments"
    page = client.get("/sql", params={"q": query})
    assert page.status_code == 200 and "<td>2</td>" in page.text
    assert client.get("/api/sql", params={"q": query}).json()["rows"] == [{"n": 2}]
    csv = client.get("/api/sql", params={"q": query, "format": "csv"})
    assert csv.text.splitlines() == ["n", "2"] and "attachment" in csv.headers[
        "content-disposition"]
    for write in ("CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
                  "COPY (SELECT 1) TO '/tmp/rayform-ui-should-not-exist.csv'"):
        refused = client.get("/api/sql", params={"q": write})
        assert refused.status_code == 400 and "read-only" in refused.json()["error"]
        assert client.get("/sql", params={"q": write}).status_code == 400


def test_sql_page_caps_rows(client: Any) -> None:
    body = client.get("/api/sql", params={"q": "SELECT * FROM generate_series(1, 150000)"}).json()
    assert body["num_rows"] == 100_000 and body["truncated"] is True


@pytest.mark.parametrize("path", [
    "/datasets/nope", "/api/datasets/nope", "/datasets/demo/segments/nope",
    "/api/datasets/demo/segments/nope", "/datasets/..%2F..%2Fetc/segments/passwd",
    "/media/demo/..%2F..%2Fetc/image?entity=/cam0/rgb",
    "/media/demo/episode_000/video?entity=../../etc/passwd",
    "/media/demo/episode_000/image?entity=%2Fcam0%2Frgb%2F..%2F..",
    "/static/../pyproject.toml", "/no/such/page",
])
def test_unknown_names_are_404_with_a_message(client: Any, path: str) -> None:
    reply = client.get(path)
    assert reply.status_code == 404
    text = reply.text
    assert "no " in text and "root:" not in text and "[project]" not in text


def test_slice_from_a_filter_is_listed_with_pinned_versions(client: Any, ui_catalog: str) -> None:
    created = client.post("/api/slices", json={"dataset": "demo", "name": "lab b",
                                               "where": "\"property:site\" = 'lab-b'"})
    assert created.status_code == 201
    body = created.json()
    version = Catalog.open(ui_catalog).get_dataset("demo").segment_record("episode_001").version
    assert body["id"].startswith("slc_") and body["segments"] == {"episode_001": version}
    listed = client.get("/api/slices").json()["slices"]
    assert body["id"] in [s["id"] for s in listed]
    assert body["id"] in client.get("/slices").text
    for bad in ({"dataset": "demo", "where": "nope ="}, {"dataset": 3}, {"what": 1}):
        assert client.post("/api/slices", json=bad).status_code == 400
    assert client.post("/api/slices", json={"dataset": "nope"}).status_code == 404
    assert client.post("/api/slices", content=b"{not json").status_code == 400


def test_pages_are_not_scriptable_from_elsewhere(client: Any) -> None:
    reply = client.get("/")
    assert "script-src 'self'" in reply.headers["content-security-policy"]
    assert reply.headers["x-content-type-options"] == "nosniff"


def test_host_warning_and_urls() -> None:
    from rayform.ui import ExposedServerWarning, ServeOptions, is_loopback
    from rayform.ui._server import warn_if_exposed

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    with pytest.warns(ExposedServerWarning, match="beyond this machine"):
        warn_if_exposed("0.0.0.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_exposed("127.0.0.1")
    assert ServeOptions(port=8765).url == "http://127.0.0.1:8765/"
    assert ServeOptions(host="::1", port=1).url == "http://[::1]:1/"
    with pytest.raises(ValueError, match="port"):
        ServeOptions(port=70000)


def test_cli_warns_for_an_exposed_host(ui_catalog: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from rayform.cli import main

    served: list[Any] = []
    monkeypatch.setattr("rayform.ui._server.run_server",
                        lambda app, options, stream: served.append(options))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["--catalog", ui_catalog, "ui", "--host", "0.0.0.0", "--port", "0",
                     "--no-browser"]) == 0
    err = capsys.readouterr().err
    assert "warning: rayform ui listens on 0.0.0.0" in err
    assert served and served[0].host == "0.0.0.0" and served[0].open_browser is False


@pytest.mark.realdata
def test_a_real_video_asset_is_served_as_stored_with_ranges(client: Any, ui_catalog: str) -> None:
    catalog = Catalog.open(ui_catalog)
    if "g1" not in catalog.dataset_names():
        pytest.skip("../shared/realdata/unitree-g1-lerobot-v21 is absent")
    episode = client.get("/api/datasets/g1/segments/episode_000029").json()
    (camera,) = episode["cameras"]
    assert camera["kind"] == "asset" and camera["codec"] == "av1"
    assert camera["mime"].startswith('video/mp4; codecs="av01')
    assert len(camera["times_s"]) == len(camera["video_s"]) == 221
    names = {s["column"]: s["names"] for s in episode["signals"]}
    assert names["/observation.state:Scalars:scalars"][0] == "kLeftShoulderPitch"
    part = client.get(camera["url"], headers={"range": "bytes=0-1023"})
    assert part.status_code == 206 and len(part.content) == 1024
    data = catalog.get_dataset("g1").open_segment("episode_000029")
    digest = next(d for layer in data.record.layers.values() for d in layer.assets)
    assert part.content == data.asset_path(digest).read_bytes()[:1024]
