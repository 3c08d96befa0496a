"""JPEG cameras in batching datasets: decoded into one buffer per block, batches cut from it
(views when the rows are consecutive), equal to DataLoader batching of the per-sample stream."""

from __future__ import annotations

import gc
import io
import itertools
import threading
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, default_collate

import rayform.dataloader._pooled_collator as pooled_module
from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    ImageDecoder,
    NoShuffle,
    NumericDecoder,
    PooledBatchCollator,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
    VideoFrameDecoder,
)
from rayform.dataloader import _block_columns as block_columns
from rayform.dataloader._block_columns import ListColumn, StackedColumn, field_column
from rayform.dataloader._iterable_dataset import fetch_threads
from rayform.decoders import TensorRows
from rayform.media._image import decode_image

pytest.importorskip("simplejpeg")

NUM_FRAMES = 20
CAM = "/cam:EncodedImage:blob"
STEP = "/step:Scalars:scalars"
FIELDS = {"image": Field(CAM, ImageDecoder()), "step": Field(STEP, NumericDecoder())}


def _jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture(scope="module")
def cams(tmp_path_factory: pytest.TempPathFactory) -> DatasetEntry:
    """Two segments of distinct 16x12 JPEG frames, one per frame index, and a step counter."""
    root = tmp_path_factory.mktemp("jpeg-cams")
    paths = []
    for k, name in enumerate(("a", "b")):
        frames = np.arange(NUM_FRAMES)
        with RecordingWriter(root / f"{name}.rfr", recording_id=name) as rec:
            rec.log_encoded_images("/cam", timelines={"frame_index": frames},
                                   blobs=[_jpeg(100 * k + int(i)) for i in frames],
                                   media_type="image/jpeg")
            rec.log_scalars("/step", timelines={"frame_index": frames}, values=frames + 100 * k)
        paths.append(root / f"{name}.rfr")
    dataset = Catalog.create(root / "catalog").create_dataset("jpeg-cams")
    dataset.register(paths).wait()
    return dataset


def _make(cams: DatasetEntry, **kwargs: Any) -> RerunIterableDataset:
    return RerunIterableDataset(DataSource(cams), "frame_index", FIELDS, **kwargs)


@pytest.mark.parametrize("strategy", [NoShuffle(), SampleShuffle(), BlockShuffle(buffer_size=3)])
@pytest.mark.parametrize("threads", [1, 2])
def test_jpeg_batches_equal_dataloader_batching(cams: DatasetEntry, strategy: Any,
                                                threads: int) -> None:
    per_sample = _make(cams, shuffle_strategy=strategy, fetch_block_size=12,
                       decode_threads=threads)
    batched = _make(cams, shuffle_strategy=strategy, fetch_block_size=12, batch_size=5,
                    decode_threads=threads)
    want = list(DataLoader(per_sample, batch_size=5))
    got = list(DataLoader(batched, batch_size=None))
    assert len(got) == len(want) == -(-2 * NUM_FRAMES // 5)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        for key in w:
            assert g[key].shape == w[key].shape and torch.equal(g[key], w[key]), key


def test_jpeg_batch_pixels_are_pillows(cams: DatasetEntry) -> None:
    batch = next(iter(_make(cams, shuffle_strategy=NoShuffle(), batch_size=4, decode_threads=1)))
    assert batch["image"].shape == (4, 3, 12, 16) and batch["image"].dtype == torch.uint8
    for i, step in enumerate(batch["step"].reshape(-1).tolist()):
        pixels = decode_image(_jpeg(int(step)), use_simplejpeg=False)
        assert pixels is not None
        assert np.array_equal(batch["image"][i].numpy(), pixels.transpose(2, 0, 1))


@pytest.mark.parametrize("threads", [1, 2])
def test_in_order_jpeg_batches_are_views_of_the_decode_buffer(cams: DatasetEntry,
                                                              threads: int) -> None:
    """Streaming in order, the batches of a block are views of the one buffer the block was
    decoded into, also when its images were split across decode threads (no stacking copy), and
    a batch that is held keeps its pixels while later blocks decode."""
    ds = _make(cams, shuffle_strategy=NoShuffle(), fetch_block_size=8, batch_size=4,
               decode_threads=threads)
    stream = iter(ds)
    first, second = itertools.islice(stream, 2)
    assert first["image"].untyped_storage().data_ptr() == \
        second["image"].untyped_storage().data_ptr(), "one buffer for the block"
    assert second["image"].storage_offset() == first["image"].storage_offset() + \
        first["image"].numel()
    kept = first["image"].clone()
    rest = list(stream)  # later blocks take buffers from the pool while `first` is held
    assert len(rest) == 2 * NUM_FRAMES // 4 - 2
    assert torch.equal(first["image"], kept)


def test_field_column_joins_only_rows_that_lie_back_to_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block_columns, "REORDER_MAX_BYTES", 0)  # rows as large as frames
    buffer = torch.arange(24, dtype=torch.uint8).reshape(6, 4)
    positions = [np.array([2, 0], dtype=np.int64), np.array([1, 3], dtype=np.int64)]
    joined = field_column(4, [(positions[0], TensorRows(buffer[0:2])),
                              (positions[1], TensorRows(buffer[2:4]))])
    assert isinstance(joined, StackedColumn)
    assert joined.tensor.data_ptr() == buffer.data_ptr() and joined.tensor.shape == (4, 4)
    assert joined.rows.tolist() == [1, 2, 0, 3]  # sample 2 is row 0, sample 0 row 1, ...
    gap = field_column(4, [(positions[0], TensorRows(buffer[0:2])),
                           (positions[1], TensorRows(buffer[3:5]))])
    apart = field_column(4, [(positions[0], TensorRows(buffer[0:2])),
                             (positions[1], TensorRows(buffer[2:4].clone()))])
    for column, second in ((gap, 3), (apart, 2)):
        assert isinstance(column, ListColumn)
        assert torch.equal(column.items[0], buffer[1]) and torch.equal(column.items[1], buffer[second])


def test_small_complete_columns_are_put_in_block_order_once() -> None:
    """Numeric rows decode in segment order; a small complete column is reordered into block
    order when it is made, so that batches of consecutive samples are views, not gathers."""
    buffer = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    positions = [np.array([2, 0], dtype=np.int64), np.array([1, 3], dtype=np.int64)]
    column = field_column(4, [(positions[0], TensorRows(buffer[0:2])),
                              (positions[1], TensorRows(buffer[2:4]))])
    assert isinstance(column, StackedColumn) and column.identity
    want = buffer[[1, 2, 0, 3]]  # sample 0 was row 1, sample 1 row 2, sample 2 row 0, ...
    assert torch.equal(column.tensor, want)
    batch = column.rows_at(1, 3)
    assert torch.equal(batch, want[1:3]) and batch.data_ptr() == column.tensor[1].data_ptr()
    partial = field_column(5, [(positions[0], TensorRows(buffer[0:2])),
                               (positions[1], TensorRows(buffer[2:4]))])
    assert isinstance(partial, StackedColumn) and not partial.identity  # sample 4 has no row
    assert partial.tensor.data_ptr() == buffer.data_ptr()


@pytest.mark.parametrize("threads", [1, 2])
def test_shuffled_jpeg_batches_are_views_too(cams: DatasetEntry, threads: int) -> None:
    """SampleShuffle emits a block's samples in block order while they decode in file order:
    each image goes to its sample's row of the block buffer, so batches stay views (no gather)."""
    ds = _make(cams, shuffle_strategy=SampleShuffle(), fetch_block_size=8, batch_size=4,
               decode_threads=threads)
    first, second = itertools.islice(iter(ds), 2)
    assert first["image"].untyped_storage().data_ptr() == \
        second["image"].untyped_storage().data_ptr(), "one buffer for the block"
    assert second["image"].storage_offset() == first["image"].storage_offset() + \
        first["image"].numel()
    steps = first["step"].reshape(-1).tolist()
    assert steps != sorted(steps) or second["step"].reshape(-1).tolist() != sorted(
        second["step"].reshape(-1).tolist()), "the samples are shuffled"
    for i, step in enumerate(steps):
        pixels = decode_image(_jpeg(int(step)), use_simplejpeg=False)
        assert pixels is not None
        assert np.array_equal(first["image"][i].numpy(), pixels.transpose(2, 0, 1))


def test_field_column_gathers_tasks_rows_of_one_block_buffer() -> None:
    buffer = torch.arange(20, dtype=torch.uint8).reshape(5, 4)
    column = field_column(5, [(np.array([3, 0]), TensorRows(buffer, np.array([3, 0]))),
                              (np.array([1, 2]), TensorRows(buffer, np.array([1, 2])))])
    assert isinstance(column, StackedColumn) and column.tensor is buffer
    assert column.rows.tolist() == [0, 1, 2, 3, -1]  # sample 4 had no request
    other = field_column(5, [(np.array([3, 0]), TensorRows(buffer, np.array([3, 0]))),
                             (np.array([1, 2]), TensorRows(buffer.clone(), np.array([1, 2])))])
    assert isinstance(other, ListColumn) and torch.equal(other.items[1], buffer[1])


def test_tensor_rows_with_rows() -> None:
    buffer = torch.arange(12).reshape(4, 3)
    rows = TensorRows(buffer, np.array([2, 0], dtype=np.int64))
    assert len(rows) == 2 and torch.equal(rows[0], buffer[2]) and torch.equal(rows[1], buffer[0])
    assert [r.tolist() for r in rows] == [buffer[2].tolist(), buffer[0].tolist()]
    assert rows[1:].rows is not None and rows[1:].rows.tolist() == [0]
    with pytest.raises(IndexError, match=r"rows must lie in \[0, 4\)"):
        TensorRows(buffer, np.array([4], dtype=np.int64))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_batches_cross_worker_processes_intact(cams: DatasetEntry) -> None:
    """Batches that are views of a block's pooled buffer reach the main process whole through
    DataLoader workers (the block's storage is shared once, its views travel as offsets)."""
    want = {int(b["step"].reshape(-1)[i]): b["image"][i].clone()
            for b in _make(cams, shuffle_strategy=NoShuffle(), batch_size=3, decode_threads=1)
            for i in range(len(b["image"]))}
    loader = DataLoader(_make(cams, shuffle_strategy=SampleShuffle(), batch_size=3,
                              fetch_block_size=8, decode_threads=1),
                        batch_size=None, num_workers=2)
    got: dict[int, torch.Tensor] = {}
    for batch in loader:
        for i, step in enumerate(batch["step"].reshape(-1).tolist()):
            got[int(step)] = batch["image"][i]
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("strategy", [NoShuffle(), SampleShuffle(), BlockShuffle(buffer_size=3)])
def test_batched_images_are_channels_last_unless_a_collate_fn_is_given(cams: DatasetEntry,
                                                                       strategy: Any) -> None:
    """Batches cut from the columns are torch.channels_last [N, C, H, W] (decoded as the JPEG
    library writes pixels, no planar copy), also when gathered across blocks; with a collate_fn
    the per-sample images stay planar [C, H, W]."""
    batches = list(_make(cams, shuffle_strategy=strategy, fetch_block_size=8, batch_size=5,
                         decode_threads=2))
    for batch in batches:
        image = batch["image"]
        assert image.is_contiguous(memory_format=torch.channels_last) or len(image) == 1
        assert image.stride(1) == 1
    seen: list[torch.Tensor] = []

    def collate(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.extend(sample["image"] for sample in samples)
        return samples

    planar = list(_make(cams, shuffle_strategy=strategy, fetch_block_size=8, batch_size=5,
                        decode_threads=2, collate_fn=collate))
    assert sum(len(b) for b in planar) == 2 * NUM_FRAMES
    assert all(image.is_contiguous() for image in seen)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("on_decode_error", ["raise", "skip"])
def test_map_jpeg_batches_are_channels_last_views_of_one_buffer(cams: DatasetEntry, threads: int,
                                                                on_decode_error: Any) -> None:
    """The map dataset decodes a batch's JPEGs as the library writes pixels, each at its
    sample's row of one [N, H, W, C] buffer: PooledBatchCollator's batch is that buffer seen as
    torch.channels_last [N, C, H, W] (no stack, no planar split), each sample's image a
    [C, H, W] view of its row, the pixels Pillow's."""
    ds = RerunMapDataset(DataSource(cams), "frame_index", FIELDS, decode_threads=threads,
                         on_decode_error=on_decode_error)
    indices = np.random.default_rng(7).permutation(len(ds))[:9].tolist()
    samples = ds.__getitems__(indices)
    batch = PooledBatchCollator()(samples)
    image = batch["image"]
    assert image.shape == (9, 3, 12, 16) and image.is_contiguous(memory_format=torch.channels_last)
    storage = image.untyped_storage().data_ptr()
    for i, sample in enumerate(samples):
        assert sample["image"].untyped_storage().data_ptr() == storage
        assert sample["image"].stride() == (1, 16 * 3, 3)
        assert sample["image"].data_ptr() == image[i].data_ptr()
        pixels = decode_image(_jpeg(int(sample["step"].reshape(-1)[0])), use_simplejpeg=False)
        assert pixels is not None
        assert np.array_equal(image[i].numpy(), pixels.transpose(2, 0, 1))
    assert torch.equal(torch.stack([s["image"] for s in samples]), image)  # default_collate's
    single = ds[indices[0]]["image"]
    assert single.stride() == (1, 16 * 3, 3) and torch.equal(single, image[0])


@pytest.mark.parametrize(("workers", "context"), [(0, None), (2, "fork"), (2, "spawn")])
def test_map_jpeg_batches_keep_their_layout_through_the_collator(cams: DatasetEntry,
                                                                 workers: int,
                                                                 context: str | None) -> None:
    """Through PooledBatchCollator, in the main process and from workers, a map batch's images
    stay torch.channels_last: the worker copies the [N, H, W, C] bytes as they lie into its slot
    (no transpose), and the samples it stacks (batches without a collated form) are stacked in
    memory order too; the values are default_collate's."""
    ds = RerunMapDataset(DataSource(cams), "frame_index", FIELDS, decode_threads=1)
    want = list(DataLoader(ds, batch_size=6))
    collate = PooledBatchCollator()
    loaders = [DataLoader(ds, batch_size=6, num_workers=workers, collate_fn=collate,
                          multiprocessing_context=context)]
    if context != "spawn":  # the stacking path: the samples as a plain list (a local lambda)
        loaders.append(DataLoader(ds, batch_size=6, num_workers=workers,
                                  collate_fn=lambda samples: collate(list(samples)),
                                  multiprocessing_context=context))
    for loader in loaders:
        got = list(loader)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g["image"].is_contiguous(memory_format=torch.channels_last) or len(w["image"]) == 1
            assert torch.equal(g["image"], w["image"]) and torch.equal(g["step"], w["step"])
            assert w["image"].is_contiguous()  # default_collate: planar


def test_windowed_jpeg_batches_equal_dataloader_batching(cams: DatasetEntry) -> None:
    fields = {"image": Field(CAM, ImageDecoder(), window=(-2, -1, 0)),
              "step": Field(STEP, NumericDecoder())}
    for strategy in (NoShuffle(), SampleShuffle(), BlockShuffle(buffer_size=3)):
        def make(strategy: Any = strategy, **kwargs: Any) -> RerunIterableDataset:
            return RerunIterableDataset(DataSource(cams), "frame_index", fields,
                                        shuffle_strategy=strategy, fetch_block_size=7,
                                        decode_threads=2, **kwargs)

        want = list(DataLoader(make(), batch_size=4))
        got = list(DataLoader(make(batch_size=4), batch_size=None))
        assert len(got) == len(want) > 0
        for g, w in zip(got, want, strict=True):
            assert g["image"].shape == w["image"].shape and g["image"].shape[1:] == (3, 3, 12, 16)
            assert torch.equal(g["image"], w["image"]) and torch.equal(g["step"], w["step"])
            assert g["image"].stride(2) == 1, "channels last"


def test_image_fields_prepare_two_blocks_at_once() -> None:
    """Image decoders are thread-safe, so the next block resolves while this one decodes, in any
    order; numeric-only fields (work under the GIL) and video read in order stay one at a time."""
    numeric = {"step": Field(STEP, NumericDecoder())}
    video = {"video": Field("/v:VideoStream:sample", VideoFrameDecoder())}
    assert fetch_threads(FIELDS, shuffled_blocks=False) == 2
    assert fetch_threads(FIELDS, shuffled_blocks=True) == 2
    assert fetch_threads(numeric, shuffled_blocks=True) == 1
    assert fetch_threads({**FIELDS, **video}, shuffled_blocks=False) == 1
    assert fetch_threads({**FIELDS, **video}, shuffled_blocks=True) == 2


class _CountingImageDecoder(ImageDecoder):
    """An ImageDecoder that records how many of its decode calls run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    def decode(self, batch: Any, requests: Any) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.002)  # long enough for the other block's tasks to overlap, if they may
            return super().decode(batch, requests)
        finally:
            with self.lock:
                self.running -= 1


@pytest.mark.parametrize("threads", [1, 2])
def test_two_blocks_at_once_decode_on_no_more_threads_than_asked(cams: DatasetEntry,
                                                                 threads: int) -> None:
    """With two blocks prepared at once, only the decode threads decode (the fetch threads wait):
    the blocks together never run more decode calls at once than ``decode_threads``, and the
    samples are those of one block at a time."""
    counting = _CountingImageDecoder()
    fields = {"image": Field(CAM, counting), "step": Field(STEP, NumericDecoder())}

    def make(decoder_fields: dict[str, Field]) -> RerunIterableDataset:
        return RerunIterableDataset(DataSource(cams), "frame_index", decoder_fields,
                                    shuffle_strategy=SampleShuffle(), seed=3, fetch_block_size=8,
                                    batch_size=4, decode_threads=threads)

    got = list(DataLoader(make(fields), batch_size=None))
    want = list(DataLoader(make(FIELDS), batch_size=None))
    assert counting.most == threads
    assert len(got) == len(want) == 2 * NUM_FRAMES // 4
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g["image"], w["image"]) and torch.equal(g["step"], w["step"])


def test_a_workers_map_batches_decode_straight_into_lent_slots(cams: DatasetEntry,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """In a worker, after its first map batch, the images of the next ones are decoded into
    slots the collator lends the decoders, sent without a copy; the batches stay equal to
    default_collate's, a lent slot turns free once the main process drops the batch, and one
    whose batch was never sent once the worker drops it."""
    from rayform.dataloader._batch_slots import FREE
    from rayform.decoders import _output_arena as arena_module

    ds = RerunMapDataset(DataSource(cams), "frame_index", FIELDS, decode_threads=2)
    collator = PooledBatchCollator(slots_per_field=2)
    monkeypatch.setattr(pooled_module, "get_worker_info", lambda: object())
    monkeypatch.setattr(arena_module, "_arena_buffers", None)
    indices = [[5, 1, 9, 3], [0, 2, 4, 6], [7, 8, 10, 11], [12, 13, 14, 15]]
    # the first batch is copied into the collator's slots: nothing was lent yet
    first = ForkingPickler.loads(ForkingPickler.dumps(collator(ds.__getitems__(indices[0]))))
    assert "decode:image" not in collator.stats()["slots"]
    second_samples = ds.__getitems__(indices[1])
    pool = collator._pool
    assert pool is not None and len(pool.slots["decode:image"]) == 1
    lent = pool.slots["decode:image"][0]
    copies = collator.stats()["reuses"] + collator.stats()["allocations"]
    second = ForkingPickler.loads(ForkingPickler.dumps(collator(second_samples)))
    assert collator.stats()["reuses"] + collator.stats()["allocations"] == copies + 1, \
        "only the step takes a slot: the image leaf is the lent one"
    assert second["image"].is_contiguous(memory_format=torch.channels_last)
    _assert_same(first, default_collate(list(ds.__getitems__(indices[0]))))
    _assert_same(second, default_collate(list(ds.__getitems__(indices[1]))))
    gc.collect()
    del second_samples
    assert int(lent.state[0]) != FREE, "held by the main process"
    del second
    assert int(lent.state[0]) == FREE
    unsent = ds.__getitems__(indices[2])  # decoded into a lent slot, then dropped unsent
    busy = [s for s in pool.slots["decode:image"] if int(s.state[0]) != FREE]
    assert len(busy) == 1
    del unsent
    assert int(busy[0].state[0]) == FREE
    third = ForkingPickler.loads(ForkingPickler.dumps(collator(ds.__getitems__(indices[3]))))
    _assert_same(third, default_collate(list(ds.__getitems__(indices[3]))))
    gc.collect()
    del first, third
    assert all(int(s.state[0]) == FREE for group in pool.slots.values() for s in group)


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key


def test_map_batches_start_decoding_images_before_resolving_numeric_fields(
        cams: DatasetEntry, monkeypatch: pytest.MonkeyPatch) -> None:
    """With decode threads, a map batch's image field is resolved and handed to the threads
    first, and the calling thread decodes one of its tasks at once (releasing the GIL the woken
    threads need); its numeric fields are resolved after that, while the threads decode."""
    from rayform.dataloader import _pipeline as pipeline_module

    ds = RerunMapDataset(DataSource(cams), "frame_index", FIELDS, decode_threads=2)
    ds.__getitems__([2, 4, 6, 8, 10, 12, 14, 16, 18])  # the pool's threads are started
    seen: list[str] = []
    resolve_field = pipeline_module.SamplePipeline._resolve_field
    run_decode = pipeline_module._run_decode
    caller = threading.get_ident()

    def recording(self: Any, plan: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(plan.key)
        return resolve_field(self, plan, *args, **kwargs)

    def decoding(job: Any, requests: Any) -> Any:
        if threading.get_ident() == caller:
            seen.append(f"decode {job.plan.key} here")
        return run_decode(job, requests)

    monkeypatch.setattr(pipeline_module.SamplePipeline, "_resolve_field", recording)
    monkeypatch.setattr(pipeline_module, "_run_decode", decoding)
    batch = PooledBatchCollator()(ds.__getitems__([3, 17, 8, 1, 30, 22, 5, 11, 0]))
    assert seen[:3] == ["image", "decode image here", "step"] and list(batch) == ["image", "step"]
    _assert_same(batch, default_collate(list(ds.__getitems__([3, 17, 8, 1, 30, 22, 5, 11, 0]))))


@pytest.mark.parametrize(("count", "threads"), [(8, 2), (32, 2), (33, 2), (128, 2), (32, 4),
                                                (1000, 8)])
def test_image_tasks_shrink_towards_the_end_of_a_block(count: int, threads: int) -> None:
    """A block's requests are cut into chunks that shrink as the work left does: every request
    in one chunk, in order, and the last chunks short, so that the threads finish the block
    together rather than one waiting for the other's last long task."""
    from rayform.dataloader._pipeline import TASKS_PER_THREAD, chunk_edges

    edges = chunk_edges(count, threads)
    sizes = np.diff(edges)
    assert edges[0] == 0 and edges[-1] == count and bool((sizes > 0).all())
    assert bool((np.diff(sizes) <= 0).all()), "no chunk longer than one before it"
    smallest = max(2, count // (2 * TASKS_PER_THREAD * threads))
    assert int(sizes[-1]) <= smallest and int(sizes[0]) >= count // (2 * threads)
    assert len(sizes) <= 5 * TASKS_PER_THREAD * threads
