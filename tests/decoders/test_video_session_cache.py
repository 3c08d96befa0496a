"""SessionCache.reclaim: a full cache gives up its oldest session of a stream, never another's."""

from __future__ import annotations

from rayform.media._video_session import DecoderSession, SessionCache


def session(key: str, stream: str | None) -> DecoderSession:
    return DecoderSession(key=key, context=object(), stream=stream)


def test_a_cache_with_room_keeps_its_sessions() -> None:
    cache = SessionCache(3)
    cache.checkin(session("a", "s1"))
    cache.checkin(session("b", "s1"))
    assert cache.reclaim("s1") is None
    assert len(cache) == 2


def test_a_full_cache_gives_up_its_oldest_session_of_the_stream() -> None:
    cache = SessionCache(3)
    for key, stream in (("a", "s2"), ("b", "s1"), ("c", "s1")):
        cache.checkin(session(key, stream))
    taken = cache.reclaim("s1")
    assert taken is not None and taken.key == "b"
    assert len(cache) == 2 and cache.checkout("c") is not None and cache.checkout("a") is not None


def test_sessions_of_other_streams_or_none_are_never_given_up() -> None:
    cache = SessionCache(2)
    cache.checkin(session("a", "s2"))
    cache.checkin(session("b", None))
    assert cache.reclaim("s1") is None and cache.reclaim(None) is None
    assert SessionCache(0).reclaim("s1") is None
