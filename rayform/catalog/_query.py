"""The query plane: a DataFusion SessionContext over the catalog, read-only SQL over it.

Each dataset is a SQL schema whose tables are looked up lazily when a query names them:

    SELECT * FROM robots.segments WHERE "property:success"
    SELECT * FROM robots.index_ranges
    SELECT * FROM robots.findings WHERE severity = 'error'      (rayform curate)
    SELECT * FROM robots.annotations WHERE label = 'grasp'     (dataset.annotate)
    SELECT rerun_segment_id, frame_index, "/joints/position:Scalars:scalars"
      FROM robots."/joints/position"

Table entries are tables of the default schema (``SELECT * FROM my_table``). The context is
created lazily per process (DataFusion's runtime does not survive ``fork``). User SQL runs with
DDL, DML and statements off unless the caller opts in; errors are translated by
:mod:`rayform.catalog._query_errors`.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow.dataset as pads
from datafusion import SessionContext, SQLOptions
from datafusion.catalog import SchemaProvider, Table

from rayform.catalog._handle import CatalogHandle
from rayform.catalog._notes import (
    ANNOTATIONS_TABLE,
    FINDINGS_TABLE,
    annotations_table,
    findings_table,
)
from rayform.catalog._query_errors import QueryDataFrame, translate_errors
from rayform.catalog._query_limits import (
    check_query_size,
    check_timeout,
    deadline,
    new_session_context,
)
from rayform.catalog._query_values import check_built_values
from rayform.catalog._statistics_sql import register_statistics_functions
from rayform.catalog._tables import entity_table
from rayform.errors import QueryError

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
_MISSING_TABLE = re.compile(r"table '[^']*' not found")
INDEX_RANGES_TABLE = "index_ranges"


class DatasetSchema(SchemaProvider):
    """A dataset as a SQL schema; tables are built when a query names them."""

    def __init__(self, catalog: QueryableCatalog, dataset_name: str) -> None:
        self._catalog = catalog
        self._dataset_name = dataset_name

    def _dataset(self) -> Any:
        return self._catalog.get_dataset(self._dataset_name)

    # DataFusion 55 reads ``table_names`` as an attribute holding a list (information_schema
    # failed with "'method' object is not an instance of 'Sequence'"), so it is a property.
    @property
    def table_names(self) -> list[str]:  # type: ignore[override]
        ds = self._dataset()
        return [SEGMENTS_TABLE, INDEX_RANGES_TABLE, FINDINGS_TABLE, ANNOTATIONS_TABLE,
                *sorted(ds.schema().entity_paths())]

    def table_exist(self, name: str) -> bool:
        return name in self.table_names

    def table(self, name: str) -> Table | None:
        ds = self._dataset()
        if name == SEGMENTS_TABLE:
            arrow = ds.segment_table_arrow()
        elif name == INDEX_RANGES_TABLE:
            arrow = ds.index_ranges_arrow()
        elif name == FINDINGS_TABLE:
            arrow = findings_table(self._catalog, self._dataset_name)
        elif name == ANNOTATIONS_TABLE:
            arrow = annotations_table(self._catalog, self._dataset_name)
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
            self._ctx = new_session_context()
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
            allow_statements: bool = False, timeout_s: float | None = None) -> QueryDataFrame:
        """Plan ``query`` (parameters as ``$name``) over the catalog.

        The query's size is bounded before planning (:func:`check_query_size`); ``timeout_s``
        bounds planning and each execution of the returned frame (main thread only).

        Read-only unless ``allow_statements``: DDL (``CREATE EXTERNAL TABLE … LOCATION``, ``DROP``),
        DML (``COPY … TO``, ``INSERT``) and statements (``SET``) are refused, so a query can
        neither read files outside the catalog nor write anywhere.

        Raises:
            QueryError: malformed SQL, an unknown table or column, a bad parameter, a refused
                write, a query over the size limits or past its deadline; and, from the
                returned frame, any error while executing it.
            ConfigError: a bad ``timeout_s``.
        """
        what = f"SQL query {query!r}"
        check_query_size(query, what=what)
        check_built_values(query, param_values, what=what)
        check_timeout(timeout_s)
        ctx = self.sync()
        options = None if allow_statements else read_only_options()
        try:
            with translate_errors(what), deadline(timeout_s, what=what):
                frame = ctx.sql(query, options=options, param_values=param_values or None)
        except QueryError as err:
            if _MISSING_TABLE.search(str(err)) is None:
                raise
            raise QueryError(f"{err}; {self._tables_hint()}") from err.__cause__
        return QueryDataFrame(frame, what=what, timeout_s=timeout_s)

    def _tables_hint(self) -> str:
        """What a query can name: the datasets' tables and the catalog's own tables."""
        datasets = self._catalog.dataset_names()
        tables = self._catalog.table_names()
        text = (f"datasets: {datasets}, each a schema with the tables DATASET.segments, "
                'DATASET.index_ranges and DATASET."/entity/path" (list them with SELECT * FROM '
                "information_schema.tables)")
        return text + (f"; tables: {tables}" if tables else "")

    def from_arrow(self, table: pa.Table) -> QueryDataFrame:
        """``table`` as a DataFrame of this process's context (errors become ``QueryError``)."""
        return QueryDataFrame(self.ctx.from_arrow(table), what="DataFrame over an Arrow table")


def read_only_options() -> SQLOptions:
    """DataFusion options refusing DDL, DML and statements (what user SQL runs with)."""
    return SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)


__all__ = ["DatasetSchema", "QueryDataFrame", "QueryPlane", "read_only_options"]
