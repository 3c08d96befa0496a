"""The catalog: storage, metadata, registration and the DataFusion query plane (no torch)."""

from __future__ import annotations

from rayform.catalog._catalog import Catalog
from rayform.catalog._dataset import (
    DatasetEntry,
    DatasetView,
    RegistrationHandle,
    RegistrationResult,
)
from rayform.catalog._importers import Importer, register_importer
from rayform.catalog._registration import OnDuplicate
from rayform.catalog._schema import ContentFilter, Schema
from rayform.catalog._segment_data import ColumnRows, SegmentData
from rayform.catalog._table_entry import TableEntry
from rayform.catalog._writer import RecordingWriter

__all__ = [
    "Catalog",
    "ColumnRows",
    "ContentFilter",
    "DatasetEntry",
    "DatasetView",
    "Importer",
    "OnDuplicate",
    "RecordingWriter",
    "RegistrationHandle",
    "RegistrationResult",
    "Schema",
    "SegmentData",
    "TableEntry",
    "register_importer",
]
