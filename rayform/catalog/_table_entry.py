"""Table entries: plain Arrow tables in the catalog (append / overwrite), queryable in SQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rayform.catalog._handle import CatalogHandle
from rayform.catalog._metadata import EntryMeta, TableVersion
from rayform.catalog._registration import schema_from_text
from rayform.catalog._versions import commit, latest_version_number, load_version
from rayform.errors import CorruptMetadataError, SchemaConflictError
from rayform.storage._documents import FORMAT_VERSION

if TYPE_CHECKING:
    import datafusion


class TableEntry:
    """An Arrow table stored as immutable, content-addressed IPC files."""

    def __init__(self, catalog: CatalogHandle, meta: EntryMeta) -> None:
        self._catalog = catalog
        self._meta = meta

    @property
    def name(self) -> str:
        return self._meta.name

    @property
    def id(self) -> str:
        return self._meta.id

    def _snapshot(self) -> TableVersion:
        number = latest_version_number(self._catalog.store, self.name)
        if number:
            return load_version(self._catalog.store, self.name, number, TableVersion)
        return self._empty()

    def _empty(self) -> TableVersion:
        """Snapshot 0: no rows, the schema given at creation."""
        if self._meta.table_schema_ipc is None:
            raise CorruptMetadataError(
                f"{self._catalog.url}/entries/{self.name}/entry.json: table entry has no "
                "table_schema_ipc; recreate the table"
            )
        return TableVersion(format="rayform-table-version", format_version=FORMAT_VERSION,
                            version=0, committed_at_ns=self._meta.created_at_ns,
                            schema_ipc=self._meta.table_schema_ipc, objects=[], num_rows=0)

    def arrow_schema(self) -> pa.Schema:
        return schema_from_text(self._snapshot().schema_ipc)

    def to_arrow(self) -> pa.Table:
        """The whole table (memory-mapped objects)."""
        snap = self._snapshot()
        schema = schema_from_text(snap.schema_ipc)
        parts = []
        for digest in snap.objects:
            parts.append(self._catalog.store.read_object(
                digest, lambda path: pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()))
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def to_arrow_reader(self) -> pa.RecordBatchReader:
        """The table as a stream of record batches (Rerun's ``TableEntry.to_arrow_reader``),
        one stored part at a time: rows never all sit in memory at once. It reads the snapshot
        current when called, even if rows are appended meanwhile."""
        snap = self._snapshot()
        schema = schema_from_text(snap.schema_ipc)
        store = self._catalog.store

        def batches() -> Iterator[pa.RecordBatch]:
            for digest in snap.objects:
                part = store.read_object(digest, lambda path: pa.ipc.open_file(
                    pa.memory_map(str(path), "r")).read_all())
                for batch in part.to_batches():
                    yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def reader(self) -> datafusion.DataFrame:
        return self._catalog.from_arrow(self.to_arrow())

    def append(self, data: pa.Table | pa.RecordBatch | None = None, **columns: Any) -> None:
        """Append rows (a table, a batch, or named columns) whose schema matches the table's."""
        self._write(data, columns, overwrite=False)

    def overwrite(self, data: pa.Table | pa.RecordBatch | None = None, **columns: Any) -> None:
        """Replace all rows."""
        self._write(data, columns, overwrite=True)

    def _write(self, data: pa.Table | pa.RecordBatch | None, columns: dict[str, Any], *,
               overwrite: bool) -> None:
        self._catalog.require_writable()
        schema = self.arrow_schema()
        if data is None:
            data = pa.table(columns)
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if not table.schema.remove_metadata().equals(schema.remove_metadata()):
            try:
                table = table.select(schema.names).cast(schema)
            except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as err:
                raise SchemaConflictError(
                    f"table {self.name!r}: rows with schema {table.schema} do not fit the table's "
                    f"schema {schema}: {err}"
                ) from err
        digest = self._catalog.store_table_object(table)

        def mutate(old: TableVersion | None, number: int) -> TableVersion:
            old = old or self._empty()
            objects = [digest] if overwrite else [*old.objects, digest]
            rows = table.num_rows if overwrite else old.num_rows + table.num_rows
            return old.model_copy(update={"version": number, "committed_at_ns": time.time_ns(),
                                          "objects": objects, "num_rows": rows})

        commit(self._catalog.store, self.name, TableVersion, mutate)


__all__ = ["TableEntry"]
