"""The CPU capabilities given to x264, so that encoding the same frames gives the same bytes.

On a CPU with AVX-512, x264 (libx264 165 in PyAV 18.1) uses AVX-512 code whose output depends
on the state of the process it runs in: exporting the same 224×224 episodes again and again in one
process, 27 of 60 MP4 files differed from the most common result, and 15 of 720 for 16×12 episodes
(every picture decoded equal; packets differed in size). With AVX-512 left out, all 780 exports
were the same bytes, those of the most common result: x264's assembly matches its C code bit for
bit, so this changes no reproducible output, and costs AVX-512's small speed-up.

Only Linux reports its flags here (``/proc/cpuinfo``); elsewhere x264 keeps its own choice.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

# What x264 needs before it uses AVX-512 (its cpu detection asks for all five).
_AVX512: Final[frozenset[str]] = frozenset(
    {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
# What x264's "AVX2" level turns on besides the older levels; every AVX-512 CPU has them.
_AVX2: Final[frozenset[str]] = frozenset({"avx", "avx2", "fma", "bmi2"})


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first ``flags`` line of ``cpuinfo``, or nothing where there is no such file."""
    try:
        with cpuinfo.open(encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def x264_asm_param(flags: frozenset[str]) -> str:
    """An x264 ``asm`` parameter that leaves AVX-512 out where ``flags`` has it, else ``""``.

    ``asm=AVX2`` turns on every level up to AVX2, which is only safe on a CPU that has them:
    a CPU without all of them keeps x264's own detection.
    """
    if flags >= _AVX512 | _AVX2:
        return "asm=AVX2"
    return ""


@functools.cache
def reproducible_x264_params() -> str:
    """``":asm=…"`` to append to an ``x264-params`` string on this machine, or ``""``."""
    param = x264_asm_param(cpu_flags())
    return f":{param}" if param else ""
