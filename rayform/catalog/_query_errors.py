"""DataFusion's errors as :class:`QueryError`: at planning, and whenever a DataFrame executes.

DataFusion raises bare ``Exception`` / ``ValueError`` / ``RuntimeError``; this is the one boundary
that translates them. :class:`QueryDataFrame` is a ``datafusion.DataFrame`` whose every method
(``collect``, ``to_arrow_table``, ``to_pandas``, ``count``, ``filter`` …) translates them too, and
whose derived frames are ``QueryDataFrame`` again, so a division by zero found while collecting
says which query failed instead of surfacing as a bare ``Exception``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FunctionType
from typing import Any

from datafusion import DataFrame

from rayform.catalog._query_limits import MEMORY_ENV, deadline, memory_limit_bytes
from rayform.errors import QueryError, RayformError

READ_ONLY_HINT = ("SQL over a rayform catalog is read-only: change datasets with register / "
                  "unregister (`rayform register`), or pass allow_statements=True (`rayform sql "
                  "--allow-statements`) to run it with DataFusion's defaults, which may read and "
                  "write any file this process can (see docs/security.md)")
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
        refused = _REFUSED.search(str(err))
        if refused:
            kind = {"Statement": "session"}.get(refused[1], refused[1])
            raise QueryError(f"{what} is a {kind} statement ({refused[2]}); {READ_ONLY_HINT}"
                             ) from err
        if "Resources exhausted" in str(err):
            raise QueryError(f"{what} needs more memory than the SQL memory pool allows "
                             f"({memory_limit_bytes()} bytes; set {MEMORY_ENV} to raise it): "
                             f"{err}") from err
        raise QueryError(f"{what} failed: {err}") from err


class QueryDataFrame(DataFrame):
    """A DataFusion DataFrame whose errors, at any step, are :class:`QueryError` naming its query.

    Args:
        frame: the DataFrame to wrap.
        what: what it computes, for error messages (e.g. ``"SQL query 'SELECT …'"``).
    """

    def __init__(self, frame: DataFrame, *, what: str, timeout_s: float | None = None) -> None:
        super().__init__(frame.df)
        self._what = what
        self._timeout_s = timeout_s

    def __iter__(self) -> Iterator[Any]:
        with translate_errors(self._what):
            with deadline(self._timeout_s, what=self._what):
                stream = iter(DataFrame.execute_stream(self))
            while True:
                try:
                    with deadline(self._timeout_s, what=self._what):
                        batch = next(stream)
                except StopIteration:
                    return
                yield batch


def _checked(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: QueryDataFrame, *args: Any, **kwargs: Any) -> Any:
        what = f"{self._what} ({name})"
        with translate_errors(what), deadline(self._timeout_s, what=what):
            result = method(self, *args, **kwargs)
        if isinstance(result, DataFrame) and not isinstance(result, QueryDataFrame):
            return QueryDataFrame(result, what=self._what, timeout_s=self._timeout_s)
        return result

    return call


_WRAPPED_DUNDERS = {"__getitem__", "__arrow_c_stream__", "__repr__", "_repr_html_"}
for _name, _member in list(vars(DataFrame).items()):
    if isinstance(_member, FunctionType) and _name not in ("__init__", "__iter__") and (
            not _name.startswith("_") or _name in _WRAPPED_DUNDERS):
        setattr(QueryDataFrame, _name, _checked(_name, _member))


__all__ = ["READ_ONLY_HINT", "QueryDataFrame", "translate_errors"]
