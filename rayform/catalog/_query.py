"""The query plane: a DataFusion SessionContext over the catalog, and DataFusion error translation.

Each dataset is a SQL schema whose tables are looked up lazily when a query names them:

    SELECT * FROM robots.segments WHERE "property:success"
    SELECT * FROM robots.index_ranges
    SELECT rerun_segment_id, frame_index, "/joints/position:Scalars:scalars"
      FROM robots."/joints/position"

Table entries are tables of the default schema (``SELECT * FROM my_table``). The context is
created lazily per process (DataFusion's runtime does not survive ``fork``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pyarrow.dataset as pads
from datafusion import DataFrame, SessionContext, SQLOptions
from datafusion.catalog import SchemaProvider, Table

from rayform.catalog._handle import CatalogHandle
from rayform.catalog._statistics_sql import register_statistics_functions
from rayform.catalog._tables import entity_table
from rayform.errors import QueryError, RayformError

if TYPE_CHECKING:
    import pyarrow as pa

    from rayform.catalog._dataset import DatasetView


class _ArrowEntry(Protocol):
    def to_arrow(self) -> pa.Table: ...


class QueryableCatalog(CatalogHandle, Protocol):
    """What the query plane needs of its catalog: the entries it serves as SQL tables."""

    def get_dataset(self, name: str) -> DatasetView: ...

    def get_table(self, name: str) -> _ArrowEntry: ...

SEGMENTS_TABLE = "segments"
INDEX_RANGES_TABLE = "index_ranges"

_T = TypeVar("_T")
# DataFusion's message for a statement SQLOptions refused: "DDL not supported: DropTable".
_REFUSED = re.compile(r"\b(DDL|DML|Statement) not supported: (\w[\w ]*)")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Turn DataFusion's bare exceptions into :class:`QueryError` naming ``what``."""
    try:
        yield
    except RayformError:  # e.g. a damaged metadata file met while planning: keep its type
        raise
    except Exception as err:  # DataFusion raises Exception / ValueError / RuntimeError
        raise QueryError(f"{what} failed: {err}") from err


class DatasetSchema(SchemaProvider):
    """A dataset as a SQL schema; tables are built when a query names them."""

    def __init__(self, catalog: QueryableCatalog, dataset_name: str) -> None:
        self._catalog = catalog
        self._dataset_name = dataset_name

    def _dataset(self) -> Any:
        return self._catalog.get_dataset(self._dataset_name)

    def table_names(self) -> set[str]:
        ds = self._dataset()
        return {SEGMENTS_TABLE, INDEX_RANGES_TABLE, *ds.schema().entity_paths()}

    def table_exist(self, name: str) -> bool:
        return name in self.table_names()

    def table(self, name: str) -> Table | None:
        ds = self._dataset()
        if name == SEGMENTS_TABLE:
            arrow = ds.segment_table_arrow()
        elif name == INDEX_RANGES_TABLE:
            arrow = ds.index_ranges_arrow()
        elif name in ds.schema().entity_paths():
            schema = ds.schema()
            columns = [(c, schema.field(c).type) for c in schema.component_columns()]
            segments = [ds.open_segment(s) for s in ds.segment_ids()]
            arrow = entity_table(segments, name, columns, schema.timelines)
        else:
            return None
        # One chunk, so one dataset fragment: with several, a query that stops early (LIMIT)
        # leaves fragment scans running into interpreter exit, which then aborts the process
        # ("FATAL: exception not rethrown").
        return Table(pads.dataset(arrow.combine_chunks()))


class QueryPlane:
    """Owns the per-process SessionContext of a catalog."""

    def __init__(self, catalog: QueryableCatalog) -> None:
        self._catalog = catalog
        self._ctx: SessionContext | None = None
        self._pid = -1
        self._schemas: set[str] = set()
        self._tables: set[str] = set()

    @property
    def ctx(self) -> SessionContext:
        if self._ctx is None or self._pid != os.getpid():
            self._ctx = SessionContext()
            register_statistics_functions(self._ctx)
            self._pid = os.getpid()
            self._schemas = set()
            self._tables = set()
        return self._ctx

    def sync(self) -> SessionContext:
        """Make every dataset and table entry of the catalog visible to SQL."""
        ctx = self.ctx
        root = ctx.catalog("datafusion")
        for name in self._catalog.dataset_names():
            if name not in self._schemas:
                root.register_schema(name, DatasetSchema(self._catalog, name))
                self._schemas.add(name)
        for name in self._catalog.table_names():
            if name in self._tables:
                ctx.deregister_table(name)
            ctx.register_dataset(name, pads.dataset(self._catalog.get_table(name).to_arrow()))
            self._tables.add(name)
        return ctx

    def sql(self, query: str, param_values: dict[str, Any] | None = None, *,
            allow_statements: bool = False) -> DataFrame:
        """Plan ``query`` (parameters as ``$name``) over the catalog.

        Raises:
            QueryError: malformed SQL, an unknown table or column, a bad parameter, or a statement
                other than a query (DDL, DML, ``SET``) without ``allow_statements``.
        """
        ctx = self.sync()
        options = None if allow_statements else (
            SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False))
        try:
            return ctx.sql(query, options=options, param_values=param_values or None)
        except Exception as err:
            refused = _REFUSED.search(str(err))
            if refused:
                kind = {"Statement": "session"}.get(refused[1], refused[1])
                raise QueryError(
                    f"SQL query {query!r} is a {kind} statement ({refused[2]}); SQL over a "
                    "rayform catalog is read-only: change datasets with register / unregister "
                    "(`rayform register`), or pass allow_statements=True (`rayform sql "
                    "--allow-statements`) to run it in this process's SQL session only"
                ) from err
            with translate_errors(f"SQL query {query!r}"):
                raise


def run_query(fn: Callable[[], _T], what: str) -> _T:
    """Run ``fn`` (e.g. a DataFrame collect) translating DataFusion errors."""
    with translate_errors(what):
        return fn()
