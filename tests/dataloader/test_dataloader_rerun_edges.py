"""SampleIndex edges where Rerun's behaviour is the contract."""

from __future__ import annotations

from rayform.dataloader import SampleIndex, SegmentMetadata


def test_global_to_local_hands_back_the_segment_objects_it_holds() -> None:
    segments = [SegmentMetadata("a", 0, 9, 10), SegmentMetadata("b", 5, 7, 3)]
    index = SampleIndex(segments)
    first, value = index.global_to_local(0)
    assert first is segments[0] and value == 0
    last, value = index.global_to_local(12)
    assert last is segments[1] and value == 7
    assert all(a is b for a, b in zip(index.segments, segments, strict=True))
