"""What a catalog's entries and views need of the catalog that made them (a structural type).

Entries, views and the query plane receive their catalog; typing them against
:class:`CatalogHandle` rather than the ``Catalog`` class keeps the catalog above them (it imports
them, they never import it back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import datafusion
    import pyarrow as pa

    from rayform.storage import Store


class CatalogHandle(Protocol):
    """The part of :class:`rayform.catalog.Catalog` its entries and views use."""

    @property
    def url(self) -> str:
        """The catalog's URL (a local path, ``s3://…`` or ``https://…``)."""
        ...

    @property
    def store(self) -> Store:
        """Where the catalog's bytes live."""
        ...

    def require_writable(self) -> None:
        """Raise ``ReadOnlyCatalogError`` unless the catalog can be written."""
        ...

    def from_arrow(self, table: pa.Table) -> datafusion.DataFrame:
        """A DataFusion DataFrame over ``table`` in the catalog's session."""
        ...

    def sql(self, query: str, param_values: dict[str, Any] | None = None) -> datafusion.DataFrame:
        """Plan a SQL query over the catalog."""
        ...

    def store_table_object(self, table: pa.Table) -> str:
        """Store ``table`` as an immutable object; its digest."""
        ...

    def dataset_names(self) -> list[str]:
        """Names of the dataset entries."""
        ...

    def table_names(self) -> list[str]:
        """Names of the table entries."""
        ...
