"""Block hashes: the sha256 of each fixed-size block of a data object, itself an object.

Written at registration beside each layer's recording file and named (by its own sha256) in the
layer's record, which is trusted metadata: a reader that fetches the list checks it against that
name like any object, and can then check every block of the data object as it arrives, so a
remote object is used block by block instead of after the whole of it was hashed.

Format (binary, all integers big-endian)::

    b"RFBLOCK1"            8 bytes   magic and format version
    block_bytes            u32       bytes per block (a power of two, 64 KiB to 16 MiB)
    size_bytes             u64       the data object's size
    digests                32 x N    sha256 of each block, N = ceil(size_bytes / block_bytes)

At the default 128 KiB a block, the list is 32 / 131072 = 0.024 % of the data.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rayform.errors import CorruptMetadataError

MAGIC: Final = b"RFBLOCK1"
BLOCK_BYTES: Final = 128 << 10
MIN_BLOCK_BYTES: Final = 64 << 10
MAX_BLOCK_BYTES: Final = 16 << 20
_HEAD = struct.Struct(">8sIQ")
_DIGEST_BYTES = 32


@dataclass(frozen=True, slots=True)
class BlockHashes:
    """The per-block sha256 list of one data object (see the module docstring).

    Attributes:
        block_bytes: bytes per block (the last block may be shorter).
        size_bytes: the object's size.
        digests: the blocks' sha256 digests, 32 bytes each, concatenated.
    """

    block_bytes: int
    size_bytes: int
    digests: bytes

    def __post_init__(self) -> None:
        problem = _problem(self.block_bytes, self.size_bytes, len(self.digests))
        if problem is not None:
            raise ValueError(problem)

    @property
    def num_blocks(self) -> int:
        return len(self.digests) // _DIGEST_BYTES

    def span(self, block: int) -> tuple[int, int]:
        """Bytes ``[start, stop)`` of block number ``block``."""
        start = block * self.block_bytes
        return start, min(start + self.block_bytes, self.size_bytes)

    def matches(self, block: int, data: bytes | memoryview) -> bool:
        """True when ``data`` is exactly block ``block``."""
        start, stop = self.span(block)
        return len(data) == stop - start and hashlib.sha256(data).digest() == self.digests[
            block * _DIGEST_BYTES:(block + 1) * _DIGEST_BYTES]

    def to_bytes(self) -> bytes:
        return _HEAD.pack(MAGIC, self.block_bytes, self.size_bytes) + self.digests

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str) -> BlockHashes:
        """Parse a block-hash object.

        Raises:
            CorruptMetadataError: not a block-hash object, or one whose sizes disagree.
        """
        if len(data) < _HEAD.size or data[:len(MAGIC)] != MAGIC:
            raise CorruptMetadataError(
                f"{source}: not a block-hash object (no {MAGIC.decode()!r} header); the catalog "
                "is damaged or was written by a newer rayform — upgrade, or run `rayform check`"
            )
        _, block_bytes, size_bytes = _HEAD.unpack_from(data)
        digests = data[_HEAD.size:]
        problem = _problem(block_bytes, size_bytes, len(digests))
        if problem is not None:
            raise CorruptMetadataError(f"{source}: damaged block-hash object: {problem}")
        return cls(block_bytes=block_bytes, size_bytes=size_bytes, digests=digests)


def hash_blocks(path: Path, *, block_bytes: int = BLOCK_BYTES) -> BlockHashes:
    """The block hashes of the file ``path``."""
    out = bytearray()
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(block_bytes):
            out += hashlib.sha256(block).digest()
            size += len(block)
    return BlockHashes(block_bytes=block_bytes, size_bytes=size, digests=bytes(out))


def _problem(block_bytes: int, size_bytes: int, digest_bytes: int) -> str | None:
    if not (MIN_BLOCK_BYTES <= block_bytes <= MAX_BLOCK_BYTES
            and block_bytes & (block_bytes - 1) == 0):
        return (f"block size {block_bytes} is not a power of two from {MIN_BLOCK_BYTES} to "
                f"{MAX_BLOCK_BYTES} bytes")
    if size_bytes < 0:
        return f"object size {size_bytes} is negative"
    blocks = -(-size_bytes // block_bytes)
    if digest_bytes != blocks * _DIGEST_BYTES:
        return (f"{digest_bytes} bytes of digests for {blocks} blocks of a {size_bytes}-byte "
                f"object (needs {blocks * _DIGEST_BYTES})")
    return None
