"""RgbScaler: decoded yuv420p frames converted to RGB straight into memory we own (libswscale).

PyAV's ``VideoReformatter`` always converts into a frame it allocates, which the loader then has to
copy into its batch buffer: a second pass over every output byte (and a fresh 150 KB buffer per
224×224 frame). This scaler calls the libswscale that PyAV itself loaded (through ``ctypes``; the
library is the one mapped into this process, so both use the same code) to convert into the
caller's array directly. It picks the colour coefficients and input range the way PyAV's reformat
does for the frame's tags (``colorspace``, ``color_range``), so the pixels are identical (a test
compares every tag PyAV accepts), and it checks each new scaler context once against PyAV's
reformat in a guarded scratch buffer before it writes into caller memory. Frames it does not
cover (another pixel format, a tag PyAV refuses) and platforms where the library is not found
are left to the caller (PyAV's reformat).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from functools import cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rayform.media._video_codec import require_av

_YUV420P: Final = 0  # AV_PIX_FMT_YUV420P
_RGB24: Final = 2  # AV_PIX_FMT_RGB24
_BILINEAR: Final = 2  # SWS_BILINEAR, PyAV's default interpolation
# AVColorSpace tag -> SWS_CS_* coefficients PyAV's reformat converts with (checked by a test);
# tags missing here (reserved, YCgCo, BT.2020 CL, …) make PyAV's reformat fail or differ.
COEFFICIENTS: Final[dict[int, int]] = {0: 5, 1: 1, 2: 5, 4: 4, 5: 5, 6: 5, 7: 7, 9: 9}
_FULL_RANGE: Final = 2  # AVCOL_RANGE_JPEG
_ONE: Final = 1 << 16  # swscale's fixed-point 1.0 (contrast, saturation)
# swscale's SIMD converters write whole blocks of pixels: on other widths they run past the end
# of a row (past the array on the last one) and leave the tail columns unlike PyAV's; PyAV's own
# frames have padded rows. Those widths (and unaligned or odd-height outputs) go to PyAV.
_WIDTH_STEP: Final = 16
_ALIGN_BYTES: Final = 16
_GUARD_BYTES: Final = 4096

_Pointers = ctypes.c_void_p * 4
_Strides = ctypes.c_int * 4


@cache
def _library() -> Any | None:
    """PyAV's libswscale with argument types declared, or ``None`` if it cannot be found."""
    av = require_av()
    import_reformatter = av.video.reformatter  # maps the library into the process
    del import_reformatter
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            paths = list(dict.fromkeys(line.split()[-1] for line in maps
                                       if "/libswscale" in line))
    except OSError:
        pass
    # Another package's copy may be mapped too: PyAV's own (beside the package) first. A copy
    # that converts otherwise is caught by the check each context passes before use.
    home = os.path.dirname(os.path.dirname(os.path.abspath(av.__file__)))
    paths.sort(key=lambda path: not os.path.abspath(path).startswith(home))
    if not paths:  # no /proc: PyAV's wheel ships its libraries beside the package
        root = os.path.dirname(os.path.dirname(av.__file__))
        paths = sorted(glob.glob(os.path.join(root, "av.libs", "libswscale*"))
                       + glob.glob(os.path.join(os.path.dirname(av.__file__), ".dylibs",
                                                "libswscale*")))
    if not paths:
        return None
    try:
        lib = ctypes.CDLL(paths[0])
        lib.sws_getContext.restype = ctypes.c_void_p
        lib.sws_getContext.argtypes = [ctypes.c_int] * 7 + [ctypes.c_void_p] * 3
        lib.sws_getCoefficients.restype = ctypes.c_void_p
        lib.sws_getCoefficients.argtypes = [ctypes.c_int]
        lib.sws_setColorspaceDetails.restype = ctypes.c_int
        lib.sws_setColorspaceDetails.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                                 ctypes.c_void_p, *[ctypes.c_int] * 4]
        lib.sws_scale.restype = ctypes.c_int
        lib.sws_scale.argtypes = [*[ctypes.c_void_p] * 3, *[ctypes.c_int] * 2,
                                  *[ctypes.c_void_p] * 2]
        lib.sws_freeContext.restype = None
        lib.sws_freeContext.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return lib


class RgbScaler:
    """Converts yuv420p frames to RGB24 into given arrays; one per thread at a time (it keeps
    one scaler context per frame size and colour tags)."""

    def __init__(self) -> None:
        self._lib = _library()
        self._contexts: dict[tuple[int, int, int, int], int] = {}
        self._src = _Pointers()
        self._src_strides = _Strides()
        self._dst = _Pointers()
        self._dst_strides = _Strides()
        # The last frame tags seen and their context: frames of one stream share them.
        self._last_tags: tuple[Any, ...] | None = None
        self._last_context = 0

    @property
    def available(self) -> bool:
        """Whether libswscale was found (otherwise :meth:`convert` always returns ``False``)."""
        return self._lib is not None

    def convert(self, frame: Any, out: npt.NDArray[np.uint8], *, address: int | None = None
                ) -> bool:
        """Convert ``frame`` (an ``av.VideoFrame``) into ``out`` (uint8 ``[H, W, 3]``,
        C-contiguous, 16-byte aligned); ``False`` (``out`` untouched) when the frame is not one
        it covers: not yuv420p, a width not a multiple of 16, an odd height, or a colour tag
        PyAV's reformat treats otherwise. ``address``: ``out``'s data address, when the caller
        knows it (reading it from the array costs as much as the checks)."""
        if self._lib is None:
            return False
        if address is None:
            address = int(out.__array_interface__["data"][0])
        if (out.shape != (frame.height, frame.width, 3) or out.dtype != np.uint8
                or not out.flags.c_contiguous):
            return False
        return self.convert_at(frame, address)

    def convert_at(self, frame: Any, address: int) -> bool:
        """:meth:`convert` into the memory at ``address``, which the caller vouches for: C-ordered
        uint8 ``[H, W, 3]`` of the frame's size, writable, ``H × W × 3`` bytes long. Only the
        frame is checked (the per-frame path of a caller that checked its buffer once)."""
        if self._lib is None or address % _ALIGN_BYTES:
            return False
        tags = (frame.format.name, frame.width, frame.height, frame.colorspace,
                frame.color_range)
        if tags == self._last_tags:
            context = self._last_context
        else:
            context = self._context_for(frame)
            self._last_tags, self._last_context = tags, context
        return bool(context) and self._scale(context, frame, address)

    def _context_for(self, frame: Any) -> int:
        """The checked scaler context for frames like ``frame``; 0 when it is not covered."""
        if frame.format.name != "yuv420p":
            return 0
        height, width = frame.height, frame.width
        coefficients = COEFFICIENTS.get(int(frame.colorspace))
        if coefficients is None or width % _WIDTH_STEP or height % 2:
            return 0
        key = (width, height, coefficients, int(frame.color_range) == _FULL_RANGE)
        context = self._contexts.get(key)
        if context is None:
            context = self._checked_context(frame, key)
        return context

    def _scale(self, context: int, frame: Any, address: int) -> bool:
        """Convert ``frame`` (yuv420p) into the ``[H, W, 3]`` array at ``address``."""
        y, u, v = frame.planes
        src, strides = self._src, self._src_strides
        src[0], src[1], src[2] = y.buffer_ptr, u.buffer_ptr, v.buffer_ptr
        strides[0], strides[1], strides[2] = y.line_size, u.line_size, v.line_size
        height = frame.height
        self._dst[0] = address
        self._dst_strides[0] = frame.width * 3
        assert self._lib is not None
        rows = self._lib.sws_scale(context, src, strides, 0, height, self._dst, self._dst_strides)
        return bool(rows == height)

    def _checked_context(self, frame: Any, key: tuple[int, int, int, int]) -> int:
        """A scaler context for ``key``, used only once it converted ``frame`` exactly as PyAV
        does without writing past the array (checked in a scratch buffer with a guard band);
        0 (and never again for ``key``) otherwise."""
        lib = self._lib
        assert lib is not None
        width, height, coefficients, full = key
        context = lib.sws_getContext(width, height, _YUV420P, width, height, _RGB24, _BILINEAR,
                                     None, None, None)
        if context:
            table = lib.sws_getCoefficients(coefficients)
            lib.sws_setColorspaceDetails(context, table, int(full), table, 1, 0, _ONE, _ONE)
            size = height * width * 3
            scratch = np.full(size + _GUARD_BYTES, 0xA5, dtype=np.uint8)
            expected = require_av().video.reformatter.VideoReformatter().reformat(
                frame, format="rgb24", threads=1).to_ndarray()
            if not (self._scale(context, frame, scratch.__array_interface__["data"][0])
                    and np.array_equal(scratch[:size].reshape(height, width, 3), expected)
                    and bool((scratch[size:] == 0xA5).all())):
                lib.sws_freeContext(context)
                context = 0
        self._contexts[key] = context or 0
        return context or 0

    def close(self) -> None:
        """Free the scaler contexts (also done when the scaler is garbage-collected)."""
        lib, contexts, self._contexts = self._lib, self._contexts, {}
        self._last_tags, self._last_context = None, 0
        if lib is not None:
            for context in contexts.values():
                if context:
                    lib.sws_freeContext(context)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter shutdown the library may be gone
            self.close()
