"""A bound on the single values user SQL asks DataFusion to build from a literal count.

``repeat('x', 2000000000)``, ``array_repeat(1, 2e9)``, ``lpad('', 2e9)`` or a scalar
``range(1e10)`` make one value of gigabytes. DataFusion's memory pool does not track the
buffers of scalar functions, so under a memory cap such a query aborts the whole process (a Rust
allocation failure), and without one it grows until the machine kills it. Before planning, the
query is tokenised (string literals and quoted names kept whole) and every call of these
functions whose count is a literal (or a ``$name`` parameter given a number) is sized: count ×
the size of the value repeated (a string literal's bytes, a nested call's size, else 8 bytes),
nesting multiplied. Over :data:`MAX_BUILT_VALUE_BYTES` the query is refused with
:class:`~rayform.errors.QueryError` naming the limit. Counts computed from columns are not
known before execution and are not bounded here (see docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rayform.errors import QueryError

MAX_BUILT_VALUE_BYTES: Final = 64 << 20
_WORD_BYTES: Final = 8  # what one element of unknown size counts for

_TOKEN: Final = re.compile(
    r"(?P<str>'(?:[^']|'')*')|(?P<ident>\"(?:[^\"]|\"\")*\")|(?P<comment>--[^\n]*|/\*.*?\*/)"
    r"|(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<param>\$\w+)|(?P<word>[A-Za-z_]\w*)"
    r"|(?P<punct>[(),])|(?P<other>\S)", re.DOTALL)

# function -> (index of the argument repeated, None when each element has a fixed size; how
# the count is found: "n" the argument at index 1, "span" the span of a range's bounds; the
# bytes of one element when it has a fixed size)
_BUILDERS: Final[dict[str, tuple[int | None, str, int]]] = {
    "repeat": (0, "n", 1), "array_repeat": (0, "n", 1), "list_repeat": (0, "n", 1),
    "lpad": (None, "n", 4), "rpad": (None, "n", 4), "array_resize": (None, "n", _WORD_BYTES),
    "list_resize": (None, "n", _WORD_BYTES), "range": (None, "span", _WORD_BYTES),
    "generate_series": (None, "span", _WORD_BYTES),
}
# Where range(…) / generate_series(…) are table functions: they stream rows, bounded by the
# memory pool and timeout_s, not built as one value.
_TABLE_POSITION: Final = frozenset({"from", "join", ","})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str


def _tokens(query: str) -> list[_Token]:
    out = []
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup or "other"
        if kind != "comment":
            out.append(_Token(kind, match.group()))
    return out


def check_built_values(query: str, param_values: Mapping[str, Any] | None = None, *,
                       what: str) -> None:
    """Refuse SQL that builds one value over :data:`MAX_BUILT_VALUE_BYTES` from a literal count.

    Raises:
        QueryError: naming the call, its size and the limit.
    """
    if not any(name in query.lower() for name in _BUILDERS):
        return
    tokens = _tokens(query)
    params = {f"${k}": v for k, v in (param_values or {}).items()}
    for at in range(len(tokens)):
        if _is_builder_call(tokens, at):
            size, end = _call_size(tokens, at, params)
            if size is not None and size > MAX_BUILT_VALUE_BYTES:
                call = " ".join(t.text[:40] for t in tokens[at:end])[:160]
                raise QueryError(
                    f"{what[:200]}…: {call} would build one value of about {size:.3g} bytes; "
                    f"the limit is {MAX_BUILT_VALUE_BYTES} bytes (MAX_BUILT_VALUE_BYTES), "
                    "because DataFusion's memory pool does not track values built by scalar "
                    "functions: use a smaller count")


def _is_builder_call(tokens: list[_Token], at: int) -> bool:
    token = tokens[at]
    if token.kind != "word" or token.text.lower() not in _BUILDERS:
        return False
    if at + 1 >= len(tokens) or tokens[at + 1].text != "(":
        return False
    if _BUILDERS[token.text.lower()][1] == "span" and at > 0:
        return tokens[at - 1].text.lower() not in _TABLE_POSITION
    return True


def _arguments(tokens: list[_Token], open_at: int) -> tuple[list[list[_Token]], int, list[int]]:
    """The top-level arguments of the call whose ``(`` is at ``open_at``, the index after its
    ``)``, and where each argument starts."""
    args: list[list[_Token]] = [[]]
    starts = [open_at + 1]
    depth = 0
    i = open_at + 1
    while i < len(tokens):
        text = tokens[i].text
        if text == "(":
            depth += 1
        elif text == ")":
            if depth == 0:
                return args, i + 1, starts
            depth -= 1
        elif text == "," and depth == 0:
            args.append([])
            starts.append(i + 1)
            i += 1
            continue
        args[-1].append(tokens[i])
        i += 1
    return args, i, starts


def _number(arg: list[_Token], params: Mapping[str, Any]) -> float | None:
    sign = 1.0
    if len(arg) == 2 and arg[0].text in "+-":
        sign = -1.0 if arg[0].text == "-" else 1.0
        arg = arg[1:]
    if len(arg) != 1:
        return None
    if arg[0].kind == "num":
        return sign * float(arg[0].text)
    value = params.get(arg[0].text) if arg[0].kind == "param" else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return sign * float(value)
    return None


def _call_size(tokens: list[_Token], at: int,
               params: Mapping[str, Any]) -> tuple[float | None, int]:
    """The bytes the builder call at ``at`` makes (None when its count is not a literal)."""
    repeated, how, fixed = _BUILDERS[tokens[at].text.lower()]
    args, end, starts = _arguments(tokens, at + 1)
    if how == "span":
        bounds = [_number(a, params) for a in args]
        if not args or any(b is None for b in bounds):
            return None, end
        values = [b for b in bounds if b is not None]
        start, stop = (0.0, values[0]) if len(values) == 1 else (values[0], values[1])
        step = abs(values[2]) if len(values) > 2 and values[2] else 1.0
        return abs(stop - start) / step * fixed, end
    count = _number(args[1], params) if len(args) > 1 else None
    if count is None:
        return None, end
    element = float(fixed)
    if repeated is not None and repeated < len(args):
        element = _element_size(tokens, starts[repeated], args[repeated], params)
    return max(count, 0.0) * element, end


def _element_size(tokens: list[_Token], start: int, arg: list[_Token],
                  params: Mapping[str, Any]) -> float:
    if len(arg) == 1 and arg[0].kind == "str":
        return float(max(1, len(arg[0].text[1:-1].replace("''", "'").encode())))
    if arg and _is_builder_call(tokens, start):
        size, end = _call_size(tokens, start, params)
        if size is not None and end == start + len(arg):
            return size
    return float(_WORD_BYTES)
