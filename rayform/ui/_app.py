"""The web application: routes, each page with its JSON twin under ``/api``.

Pages (HTML, Jinja2 templates) and their twins::

    /                                   /api/datasets                  the datasets
    /datasets/NAME                      /api/datasets/NAME             segment table (filter,
                                                                       sort, page, verdicts)
                                        /api/datasets/NAME/statistics  per column and dimension
    /datasets/NAME/segments/ID          /api/datasets/NAME/segments/ID one episode
    /sql?q=…                            /api/sql?q=…&format=json|csv   a read-only query
    /slices                             /api/slices (GET; POST creates one from a filter)
    /media/NAME/ID/image?entity=E&row=N                                one encoded image
    /media/NAME/ID/video?entity=E[&format=webm]                        a camera as video (ranges)

DataFusion runs on the event loop's thread (the main one under ``rayform ui``, where the
catalog's query timeout works); reading recordings and video work run in the thread pool.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from rayform._defaults import UI_SQL_TIMEOUT_S
from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import (
    ColumnNotFoundError,
    ConfigError,
    DecodeError,
    EntryNotFoundError,
    QueryError,
    ReadOnlyCatalogError,
    SegmentNotFoundError,
)
from rayform.ui._deps import require_ui
from rayform.ui._episode import PLOT_WIDTH, Axis, episode_axis, load_episode
from rayform.ui._media import (
    MIME_CODECS,
    MediaNotFoundError,
    VideoFiles,
    asset_codec,
    image_bytes,
)
from rayform.ui._overview import catalog_overview
from rayform.ui._segment_table import HIDDEN_COLUMNS, SegmentTables, TableQuery, segment_page
from rayform.ui._slice_pages import all_slices, slice_from_filter, slice_json
from rayform.ui._sql_page import DOWNLOAD_ROWS, PAGE_ROWS, run_query
from rayform.ui._statistics import statistics_rows
from rayform.ui._values import cell_text

HERE = Path(__file__).parent
DEFAULT_SQL_TIMEOUT_S = UI_SQL_TIMEOUT_S
EXAMPLE_QUERY = "SELECT count(*) FROM {}.segments"
# The dataset page computes statistics as it opens up to this many segments; beyond, on a click.
AUTO_STATISTICS_SEGMENTS = 500
MIN_PLOT_WIDTH, MAX_PLOT_WIDTH = 16, 4096  # ?width= of the episode: pixel columns of its plots


@dataclass(slots=True, kw_only=True)
class UiState:
    """What every request reads: the catalog and the server-side caches."""

    catalog: Catalog
    videos: VideoFiles
    sql_timeout_s: float | None = DEFAULT_SQL_TIMEOUT_S
    statistics: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    codecs: dict[str, str | None] = field(default_factory=dict)
    tables: SegmentTables = field(default_factory=SegmentTables)

    def timeout(self) -> float | None:
        """The SQL timeout where it can work (SIGALRM reaches the main thread only)."""
        on_main = threading.current_thread() is threading.main_thread()
        return self.sql_timeout_s if on_main else None

    def dataset(self, name: str) -> DatasetEntry:
        """The dataset ``name`` (its newest snapshot); EntryNotFoundError names the others."""
        names = self.catalog.dataset_names()
        if name not in names:
            raise EntryNotFoundError(f"no dataset {name!r} in this catalog; it has: "
                                     f"{', '.join(names) or 'none'}")
        return self.catalog.get_dataset(name)


_STATUS = ((EntryNotFoundError, 404), (SegmentNotFoundError, 404), (MediaNotFoundError, 404),
           (ColumnNotFoundError, 404), (QueryError, 400), (ConfigError, 400), (DecodeError, 422),
           (ReadOnlyCatalogError, 403))


def status_of(err: Exception) -> int | None:
    return next((code for kind, code in _STATUS if isinstance(err, kind)), None)


def _int_param(params: Any, name: str, default: int) -> int:
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {text!r}") from None


def table_query(params: Any) -> TableQuery:
    """The segment table's query parameters: ``where``, ``sort``, ``desc``, ``page``, ``page_size``."""
    where = (params.get("where") or "").strip() or None
    sort = params.get("sort") or "rerun_segment_id"
    return TableQuery(where=where, sort=sort, descending=params.get("desc") in ("1", "true"),
                      page=_int_param(params, "page", 1),
                      page_size=_int_param(params, "page_size", 50))


def _size_text(size: Any) -> str:
    value = float(size or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _duration_text(seconds: Any) -> str:
    if seconds is None:
        return ""
    s = float(seconds)
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def create_app(catalog: Catalog | str, *, cache_dir: Path | None = None,
               sql_timeout_s: float | None = DEFAULT_SQL_TIMEOUT_S) -> Any:
    """The Starlette application over ``catalog`` (a :class:`Catalog` or its URL).

    Args:
        cache_dir: where remuxed and transcoded videos are kept (default: the rayform cache,
            ``~/.cache/rayform/ui``).
        sql_timeout_s: the timeout of each SQL query (applied on the main thread).
    """
    require_ui()
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import (
        FileResponse,
        JSONResponse,
        Response,
    )
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    from rayform._defaults import default_cache_dir

    cat = catalog if isinstance(catalog, Catalog) else Catalog.open(catalog)
    root = (cache_dir or default_cache_dir() / "ui") / "video"
    state = UiState(catalog=cat, videos=VideoFiles(root), sql_timeout_s=sql_timeout_s)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.filters["cell"] = cell_text
    env.filters["size"] = _size_text
    env.filters["duration"] = _duration_text
    env.filters["tojson_compact"] = lambda v: json.dumps(v, separators=(",", ":"))
    env.globals["catalog_url"] = cat.url

    def page(template: str, build: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                context = await build(request)
            except Exception as err:
                code = status_of(err)
                if code is None:
                    raise
                return templates.TemplateResponse(request, "error.html",
                                                  {"status": code, "message": str(err)},
                                                  status_code=code)
            return templates.TemplateResponse(request, template, context)
        return endpoint

    def api(build: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                result = await build(request)
            except Exception as err:
                code = status_of(err)
                if code is None:
                    raise
                return JSONResponse({"error": str(err), "status": code}, status_code=code)
            return result if isinstance(result, Response) else JSONResponse(result)
        return endpoint

    # --- the data behind each page (shared by the page and its twin) ---

    async def datasets(request: Request) -> dict[str, Any]:
        summaries = [s.to_json() for s in catalog_overview(cat, state.tables)]
        return {"catalog": cat.url, "datasets": summaries}

    async def dataset_page(request: Request) -> dict[str, Any]:
        ds = state.dataset(request.path_params["name"])
        result = segment_page(state.tables, ds, table_query(request.query_params),
                              timeout_s=state.timeout())
        return {"page": result.to_json(), "hidden": HIDDEN_COLUMNS,
                "segments_in_dataset": state.tables.get(ds)[0].num_rows,
                "auto_statistics": AUTO_STATISTICS_SEGMENTS}

    async def statistics(request: Request) -> dict[str, Any]:
        ds = state.dataset(request.path_params["name"])
        key = (ds.name, ds.snapshot_version)
        if key not in state.statistics:
            state.statistics[key] = await run_in_threadpool(statistics_rows, ds)
        return {"dataset": ds.name, "version": ds.snapshot_version,
                "statistics": state.statistics[key]}

    async def episode(request: Request) -> dict[str, Any]:
        ds = state.dataset(request.path_params["name"])
        width = _int_param(request.query_params, "width", PLOT_WIDTH)
        if not MIN_PLOT_WIDTH <= width <= MAX_PLOT_WIDTH:
            raise ConfigError(f"width must be between {MIN_PLOT_WIDTH} and {MAX_PLOT_WIDTH} "
                              f"pixels, got {width}")
        found = await run_in_threadpool(load_episode, ds, request.path_params["segment"],
                                        catalog_url=cat.url, plot_width=width)
        data = found.to_json()
        for camera in data["cameras"]:
            kind = "image" if camera["kind"] == "image" else "video"
            camera["url"] = str(request.url_for("media_" + kind, name=ds.name,
                                                segment=found.segment).path)
            camera["url"] += "?" + urlencode({"entity": camera["entity"]})
            if kind == "video":
                codec = camera["codec"] or await run_in_threadpool(
                    _asset_codec, ds, found.segment, camera["entity"], found.axis)
                camera["codec"] = codec
                camera["mime"] = MIME_CODECS.get(codec or "", "video/mp4")
                camera["fallback_url"] = camera["url"] + "&format=webm"
        player = {"axis": data["axis"], "cameras": data["cameras"], "plot_width": width}
        return {"episode": data, "plots": found.signals, "player": player}

    def _asset_codec(ds: DatasetEntry, segment: str, entity: str, axis: Axis) -> str | None:
        data = ds.open_segment(segment)
        path, _ = state.videos.playable(data, entity, axis)
        key = str(path)
        if key not in state.codecs:
            state.codecs[key] = asset_codec(path)
        return state.codecs[key]

    async def sql(request: Request) -> dict[str, Any]:
        query = (request.query_params.get("q") or "").strip()
        names = cat.dataset_names()
        example = EXAMPLE_QUERY.format(names[0] if names else "demo")
        if not query:
            return {"query": "", "example": example, "result": None}
        result = run_query(cat, query, max_rows=PAGE_ROWS, timeout_s=state.timeout())
        return {"query": query, "example": example, "result": result.to_json()}

    async def sql_api(request: Request) -> Response:
        query = (request.query_params.get("q") or "").strip()
        if not query:
            raise ConfigError("q: give a SQL query, e.g. /api/sql?q=SELECT+1")
        fmt = request.query_params.get("format", "json")
        if fmt not in ("json", "csv"):
            raise ConfigError(f"format must be json or csv, got {fmt!r}")
        result = run_query(cat, query, max_rows=DOWNLOAD_ROWS, timeout_s=state.timeout())
        if fmt == "csv":
            return Response(result.to_csv(), media_type="text/csv",
                            headers={"content-disposition": 'attachment; filename="query.csv"'})
        download = request.query_params.get("download") in ("1", "true")
        headers = {"content-disposition": 'attachment; filename="query.json"'} if download else {}
        return JSONResponse(result.to_json(), headers=headers)

    async def slices(request: Request) -> dict[str, Any]:
        return {"slices": all_slices(cat), "datasets": cat.dataset_names()}

    async def slices_api(request: Request) -> Any:
        if request.method == "GET":
            return await slices(request)
        try:
            body = json.loads(await request.body())
        except ValueError:
            raise ConfigError("the request body must be JSON") from None
        created = slice_from_filter(cat, body)
        return JSONResponse(slice_json(created), status_code=201)

    # --- media ---

    def _media_target(request: Request) -> tuple[Any, str, Axis]:
        ds = state.dataset(request.path_params["name"])
        segment = request.path_params["segment"]
        record = ds.segment_record(segment)
        entity = request.query_params.get("entity") or ""
        if entity not in record.entities:
            raise MediaNotFoundError(f"segment {segment!r} has no entity {entity!r}; its "
                                     f"entities: {', '.join(sorted(record.entities))}")
        return ds.open_segment(segment), entity, episode_axis(ds, record)

    async def media_image(request: Request) -> Response:
        def read() -> tuple[bytes, str]:
            data, entity, axis = _media_target(request)
            return image_bytes(data, entity, axis.timeline, _int_param(request.query_params,
                                                                        "row", 0))
        blob, media_type = await run_in_threadpool(read)
        return Response(blob, media_type=media_type,
                        headers={"cache-control": "private, max-age=3600"})

    async def media_video(request: Request) -> Response:
        fmt = request.query_params.get("format", "mp4")
        if fmt not in ("mp4", "webm"):
            raise ConfigError(f"format must be mp4 or webm, got {fmt!r}")

        def make() -> tuple[Path, str]:
            data, entity, axis = _media_target(request)
            if fmt == "webm":
                return state.videos.transcoded(data, entity, axis), "video/webm"
            return state.videos.playable(data, entity, axis)
        path, media_type = await run_in_threadpool(make)
        return FileResponse(path, media_type=media_type)

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"no page {request.url.path!r}" if exc.status_code == 404 else str(exc.detail)
        if request.url.path.startswith(("/api/", "/media/")):
            return JSONResponse({"error": message, "status": exc.status_code},
                                status_code=exc.status_code)
        return templates.TemplateResponse(request, "error.html",
                                          {"status": exc.status_code, "message": message},
                                          status_code=exc.status_code)

    routes = [
        Route("/", page("index.html", datasets), name="index"),
        Route("/datasets/{name}", page("dataset.html", dataset_page), name="dataset"),
        Route("/datasets/{name}/segments/{segment}", page("segment.html", episode),
              name="segment"),
        Route("/sql", page("sql.html", sql), name="sql"),
        Route("/slices", page("slices.html", slices), name="slices"),
        Route("/api/datasets", api(datasets)),
        Route("/api/datasets/{name}", api(_twin(dataset_page, "page"))),
        Route("/api/datasets/{name}/statistics", api(statistics), name="statistics"),
        Route("/api/datasets/{name}/segments/{segment}", api(_twin(episode, "episode"))),
        Route("/api/sql", api(sql_api)),
        Route("/api/slices", api(slices_api), methods=["GET", "POST"]),
        Route("/media/{name}/{segment}/image", api(media_image), name="media_image"),
        Route("/media/{name}/{segment}/video", api(media_video), name="media_video"),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found})
    return security_headers(app)


# Pages run only this server's scripts and load only its media: a value from a recording shown
# on a page cannot bring a script in, and a served blob is never sniffed into HTML.
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; media-src 'self' blob:; "
                           "style-src 'self' 'unsafe-inline'; script-src 'self'; "
                           "object-src 'none'; frame-ancestors 'none'; base-uri 'none'")


def security_headers(app: Any) -> Any:
    """Wrap ``app`` (ASGI) so that every response carries the policy headers."""
    extra = [(b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
             (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *[h for h in extra if h[0] not in names]]}
            await send(message)

        await app(scope, receive, send_with_headers)

    return wrapped


def _twin(build: Callable[[Any], Awaitable[dict[str, Any]]], key: str
          ) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """The JSON twin of a page whose data is the ``key`` item of what ``build`` gives."""
    async def twin(request: Any) -> dict[str, Any]:
        return dict((await build(request))[key])
    return twin
