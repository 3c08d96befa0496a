"""Time-ranged notes on a dataset's segments: annotations and curation findings, as catalog data.

A note is one row: a segment (and the version it was made on), a label, a severity, optionally a
column and its dimensions, a half-open row range ``[start_row, end_row)`` on the segment's
sequence timeline and the same range in ns on its temporal timeline, the evidence (value,
threshold, baseline) and a message. A subtask label, a "gripper slipped here" note and a
``rayform curate`` finding are the same kind of row (``kind`` tells them apart).

Storage: ``entries/<dataset>/notes/versions/<n>.json`` (:class:`NotesVersion`), committed through
the same exclusive-create commit as every snapshot, names content-addressed Arrow IPC objects:
the annotations (appended) and the latest findings (replaced as a whole by each curation run,
with the segment versions they were computed on, so a later run recomputes only new versions).
SQL sees them as ``<dataset>.annotations`` and ``<dataset>.findings``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from rayform._digest import Digest
from rayform.catalog._handle import CatalogHandle
from rayform.catalog._metadata import SegmentId, SegmentVersionId
from rayform.catalog._versions import commit, entry_prefix, latest_version_number, load_version
from rayform.errors import ConfigError, CorruptMetadataError
from rayform.storage._documents import FORMAT_VERSION

FINDINGS_TABLE: Final = "findings"
ANNOTATIONS_TABLE: Final = "annotations"
KIND_FINDING: Final = "finding"
KIND_ANNOTATION: Final = "annotation"
SEVERITIES: Final = ("info", "warning", "error")

NOTES_SCHEMA: Final = pa.schema([
    ("segment", pa.string()),          # null: a finding about the whole dataset (coverage)
    ("segment_version", pa.string()),
    ("dataset_version", pa.int64()),
    ("kind", pa.string()),             # "finding" or "annotation"
    ("check", pa.string()),            # a finding's check id; null for annotations
    ("label", pa.string()),            # an annotation's label; a finding's check id
    ("severity", pa.string()),         # info / warning / error
    ("column", pa.string()),
    ("dims", pa.list_(pa.int64())),
    ("dim_names", pa.list_(pa.string())),
    ("timeline", pa.string()),         # the sequence timeline start_row/end_row are on
    ("start_row", pa.int64()),         # half-open [start_row, end_row)
    ("end_row", pa.int64()),
    ("time_timeline", pa.string()),    # the temporal timeline start_ns/end_ns are on
    ("start_ns", pa.int64()),          # half-open [start_ns, end_ns)
    ("end_ns", pa.int64()),
    ("value", pa.float64()),
    ("threshold", pa.float64()),
    ("baseline", pa.float64()),
    ("message", pa.string()),
    ("attrs", pa.string()),            # JSON object
    ("created_at_ns", pa.int64()),
])
NOTE_COLUMNS: Final = tuple(NOTES_SCHEMA.names)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NotesVersion(_Strict):
    """``entries/<dataset>/notes/versions/<n>.json``: the dataset's annotations and findings."""

    format: Literal["rayform-notes-version"]
    format_version: Literal[1]
    version: int
    committed_at_ns: int
    annotations: list[Digest]
    num_annotations: int
    findings: Digest | None
    num_findings: int
    findings_dataset_version: int
    findings_config: str
    # the segment versions the findings were computed on
    checked: dict[SegmentId, SegmentVersionId]


def notes_entry(dataset: str) -> str:
    """The name the notes commit under (``entries/<dataset>/notes/versions/…``)."""
    return f"{dataset}/notes"


def notes_prefix(dataset: str) -> str:
    return entry_prefix(notes_entry(dataset))


def load_notes(catalog: CatalogHandle, dataset: str) -> NotesVersion | None:
    """The newest notes snapshot of ``dataset`` (None before the first note)."""
    number = latest_version_number(catalog.store, notes_entry(dataset))
    if not number:
        return None
    return load_version(catalog.store, notes_entry(dataset), number, NotesVersion)


def _empty(number: int) -> NotesVersion:
    return NotesVersion(format="rayform-notes-version", format_version=FORMAT_VERSION,
                        version=number, committed_at_ns=time.time_ns(), annotations=[],
                        num_annotations=0, findings=None, num_findings=0,
                        findings_dataset_version=0, findings_config="", checked={})


def _read(catalog: CatalogHandle, digest: str) -> pa.Table:
    source = f"{catalog.url}/objects (notes object {digest})"

    def read(path: Any) -> pa.Table:
        try:
            with pa.memory_map(str(path), "r") as mm:
                table = pa.ipc.open_file(mm).read_all()
        except (pa.ArrowException, OSError) as err:
            raise CorruptMetadataError(f"{source}: not a readable Arrow IPC file ({err})") from err
        if not table.schema.remove_metadata().equals(NOTES_SCHEMA):
            raise CorruptMetadataError(
                f"{source}: columns {table.schema.names} are not the notes columns "
                f"{list(NOTE_COLUMNS)}; the object is damaged or crafted"
            )
        return table

    try:
        return catalog.store.read_object(digest, read)
    except FileNotFoundError as err:
        raise CorruptMetadataError(f"{source}: missing from the catalog ({err})") from err


def annotations_table(catalog: CatalogHandle, dataset: str) -> pa.Table:
    """Every annotation of ``dataset`` (the ``<dataset>.annotations`` SQL table)."""
    notes = load_notes(catalog, dataset)
    parts = [_read(catalog, d) for d in (notes.annotations if notes else [])]
    return pa.concat_tables(parts) if parts else NOTES_SCHEMA.empty_table()


def findings_table(catalog: CatalogHandle, dataset: str) -> pa.Table:
    """The latest curation findings of ``dataset`` (the ``<dataset>.findings`` SQL table)."""
    notes = load_notes(catalog, dataset)
    if notes is None or notes.findings is None:
        return NOTES_SCHEMA.empty_table()
    return _read(catalog, notes.findings)


def notes_rows(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts keyed by the note columns; missing keys are null) as a notes table."""
    return pa.Table.from_pylist([{k: r.get(k) for k in NOTE_COLUMNS} for r in rows],
                                schema=NOTES_SCHEMA)


def append_annotations(catalog: CatalogHandle, dataset: str, table: pa.Table) -> NotesVersion:
    """Commit ``table`` (notes rows) as new annotations of ``dataset``."""
    catalog.require_writable()
    digest = catalog.store_table_object(table.cast(NOTES_SCHEMA))

    def mutate(old: NotesVersion | None, number: int) -> NotesVersion:
        base = old or _empty(number)
        return base.model_copy(update={
            "version": number, "committed_at_ns": time.time_ns(),
            "annotations": [*base.annotations, digest],
            "num_annotations": base.num_annotations + table.num_rows})

    return commit(catalog.store, notes_entry(dataset), NotesVersion, mutate)


def replace_findings(catalog: CatalogHandle, dataset: str, table: pa.Table, *,
                     dataset_version: int, config: str, checked: Mapping[str, str]
                     ) -> NotesVersion:
    """Commit ``table`` as the findings of ``dataset`` (replacing the previous ones)."""
    catalog.require_writable()
    digest = catalog.store_table_object(table.cast(NOTES_SCHEMA))

    def mutate(old: NotesVersion | None, number: int) -> NotesVersion:
        base = old or _empty(number)
        return base.model_copy(update={
            "version": number, "committed_at_ns": time.time_ns(), "findings": digest,
            "num_findings": table.num_rows, "findings_dataset_version": dataset_version,
            "findings_config": config, "checked": dict(checked)})

    return commit(catalog.store, notes_entry(dataset), NotesVersion, mutate)


def merge_findings(catalog: CatalogHandle, dataset: str, table: pa.Table, *,
                   segments: Mapping[str, str], dataset_version: int, config: str
                   ) -> NotesVersion:
    """Commit ``table`` as the findings of ``segments`` (id -> version), keeping the stored
    findings of every other segment (registration's checks on the segments it adds).

    The segments count as checked (a later run with the same ``config`` reuses them) only when
    the stored findings were made with ``config`` or there are none yet; otherwise a later
    ``curate`` recomputes them with its own checks.
    """
    catalog.require_writable()
    new = table.cast(NOTES_SCHEMA)
    replaced = pa.array(sorted(segments), pa.string())

    def mutate(old: NotesVersion | None, number: int) -> NotesVersion:
        base = old or _empty(number)
        merged = new
        if base.findings is not None:
            previous = _read(catalog, base.findings)
            keep = pc.invert(pc.is_in(previous.column("segment"), replaced)).fill_null(True)
            merged = pa.concat_tables([previous.filter(keep), new])
        digest = catalog.store_table_object(merged)
        same = base.findings is None or base.findings_config == config
        checked = {k: v for k, v in base.checked.items() if k not in segments}
        if same:
            checked.update(segments)
        return base.model_copy(update={
            "version": number, "committed_at_ns": time.time_ns(), "findings": digest,
            "num_findings": merged.num_rows,
            "findings_dataset_version": dataset_version if same
            else base.findings_dataset_version,
            "findings_config": config if same else base.findings_config, "checked": checked})

    return commit(catalog.store, notes_entry(dataset), NotesVersion, mutate)


def attrs_json(attrs: Mapping[str, Any]) -> str:
    """``attrs`` as a JSON object (values must be JSON scalars, lists or objects)."""
    try:
        return json.dumps(dict(attrs), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"annotation attributes must be JSON values, got {dict(attrs)!r}: "
                          f"{err}") from None


__all__ = ["ANNOTATIONS_TABLE", "FINDINGS_TABLE", "KIND_ANNOTATION", "KIND_FINDING",
           "NOTES_SCHEMA", "NOTE_COLUMNS", "SEVERITIES", "NotesVersion", "annotations_table",
           "append_annotations", "attrs_json", "findings_table", "load_notes", "merge_findings",
           "notes_entry",
           "notes_prefix", "notes_rows", "replace_findings"]
