"""Open decoder sessions: a codec context part-way through a stream, kept for the next read.

A session remembers where its decoder is (the stream it reads, the next packet to feed, the last
frame it emitted) so that a read that continues forward (sequential sampling, or the next block of
a GOP) feeds only the new packets instead of decoding again from the keyframe. Sessions live in a
small LRU (:class:`SessionCache`); a session is checked out while one thread uses it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, kw_only=True, eq=False)
class DecoderSession:
    """A PyAV codec context and its position in one stream.

    Attributes:
        key: identifies the stream lineage (see :class:`SessionCache`).
        context: the ``av.CodecContext``.
        next_position: the position (stream-specific) of the next packet to feed.
        pts_base: the pts given to the packet at position 0 (packet streams number their
            packets themselves).
        last_fed: the bytes of the last packet fed (to check a packet stream is the same one).
        anchor: for packet streams, the bytes of the keyframe positions are counted from.
        last_pts: the pts of the last frame the decoder emitted, ``None`` if none yet.
        last_frame: that frame (an ``av.VideoFrame``), to serve a repeated request.
        reformatter: a reusable ``VideoReformatter`` (keeps its scaler between frames).
        stream: what the decoder was opened for (a packet stream's segment and codec), so that
            a new session of the same stream may take it over (:meth:`SessionCache.reclaim`);
            ``None``: never taken over.
    """

    key: Hashable
    context: Any
    next_position: int = 0
    pts_base: int = 0
    last_fed: bytes | None = None
    anchor: bytes | None = None
    last_pts: int | None = None
    last_frame: Any = None
    reformatter: Any = field(default=None)
    stream: Hashable | None = None


class SessionCache:
    """A thread-safe LRU of :class:`DecoderSession`, at most ``capacity`` kept (0 keeps none).

    ``on_evict`` is called (outside the lock) with each session the cache drops: evicted, replaced
    by another of the same key, refused (capacity 0) or cleared.
    """

    def __init__(self, capacity: int, *,
                 on_evict: Callable[[DecoderSession], None] | None = None) -> None:
        self._capacity = capacity
        self._sessions: OrderedDict[Hashable, DecoderSession] = OrderedDict()
        self._lock = threading.Lock()
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._sessions)

    def checkout(self, key: Hashable) -> DecoderSession | None:
        """Remove and return the session for ``key`` (the caller owns it until :meth:`checkin`)."""
        with self._lock:
            return self._sessions.pop(key, None)

    def checkin(self, session: DecoderSession) -> None:
        """Keep ``session`` as the most recently used one, evicting the oldest beyond capacity."""
        dropped: list[DecoderSession] = []
        if self._capacity <= 0:
            dropped.append(session)
        else:
            with self._lock:
                old = self._sessions.pop(session.key, None)
                if old is not None and old is not session:
                    dropped.append(old)
                self._sessions[session.key] = session
                while len(self._sessions) > self._capacity:
                    dropped.append(self._sessions.popitem(last=False)[1])
        self._evicted(dropped)

    def _evicted(self, sessions: list[DecoderSession]) -> None:
        if self._on_evict is not None:
            for session in sessions:
                self._on_evict(session)

    def reclaim(self, stream: Hashable) -> DecoderSession | None:
        """When the cache is full, remove and return its least recently used session of
        ``stream``, whose decoder a new session of that stream may take over (flushed) instead
        of opening one: the cache would drop a session at the next :meth:`checkin` anyway, so
        no more decoders exist at once. ``None`` when the cache has room or no such session."""
        if self._capacity <= 0 or stream is None:
            return None
        with self._lock:
            if len(self._sessions) < self._capacity:
                return None
            for key, session in self._sessions.items():
                if session.stream == stream:
                    del self._sessions[key]
                    return session
        return None

    def clear(self) -> None:
        with self._lock:
            dropped = list(self._sessions.values())
            self._sessions.clear()
        self._evicted(dropped)
