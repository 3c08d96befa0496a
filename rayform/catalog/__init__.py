"""The catalog: datasets and tables, snapshots, registration, slices, SQL and statistics (no torch)."""

from __future__ import annotations

from rayform.catalog._catalog import Catalog
from rayform.catalog._check import CheckReport, check_catalog
from rayform.catalog._client import CatalogClient
from rayform.catalog._dataset import DatasetView
from rayform.catalog._dataset_entry import (
    DatasetEntry,
    RegistrationHandle,
    RegistrationResult,
    SegmentRegistrationResult,
)
from rayform.catalog._gc import GcReport, gc_catalog
from rayform.catalog._pull import PullResult, pull_slice
from rayform.catalog._registration import OnDuplicate
from rayform.catalog._schema import (
    ComponentColumnDescriptor,
    ContentFilter,
    IndexColumnDescriptor,
    Schema,
)
from rayform.catalog._schema_gaps import ColumnGaps, schema_gaps
from rayform.catalog._segment_data import ColumnRows, SegmentData
from rayform.catalog._slices import ExcludedRange, Slice, SliceSegment, TimeRange
from rayform.catalog._statistics import (
    ColumnStatistics,
    DatasetStatistics,
    compute_statistics,
)
from rayform.catalog._table_entry import TableEntry
from rayform.catalog._unregistration import UnregistrationHandle, UnregistrationResult
from rayform.importers import Importer, ImportOptions, register_importer
from rayform.recording import RecordingWriter
from rayform.storage import index_catalog

__all__ = [
    "Catalog",
    "CatalogClient",
    "CheckReport",
    "ColumnGaps",
    "ColumnRows",
    "ColumnStatistics",
    "ComponentColumnDescriptor",
    "ContentFilter",
    "DatasetEntry",
    "DatasetStatistics",
    "DatasetView",
    "ExcludedRange",
    "GcReport",
    "ImportOptions",
    "Importer",
    "IndexColumnDescriptor",
    "OnDuplicate",
    "PullResult",
    "RecordingWriter",
    "RegistrationHandle",
    "RegistrationResult",
    "Schema",
    "SegmentData",
    "SegmentRegistrationResult",
    "Slice",
    "SliceSegment",
    "TableEntry",
    "TimeRange",
    "UnregistrationHandle",
    "UnregistrationResult",
    "check_catalog",
    "compute_statistics",
    "gc_catalog",
    "index_catalog",
    "pull_slice",
    "register_importer",
    "schema_gaps",
]
