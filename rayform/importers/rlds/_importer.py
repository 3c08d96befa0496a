"""Register an RLDS / TFDS builder folder: one segment per episode, read without TensorFlow."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rayform.errors import ConfigError, CorruptRecordingError, FormatError
from rayform.importers._base import Importer
from rayform.importers._options import ImportOptions
from rayform.importers._time_grid import check_rate_hz
from rayform.importers.rlds._builder import builder_dir, read_builder_info
from rayform.importers.rlds._episode import EpisodeSource, write_episode
from rayform.importers.rlds._example import WireError, parse_example
from rayform.importers.rlds._features import LeafSpec, read_features
from rayform.importers.rlds._tfrecord import iter_records


class RldsImporter(Importer):
    """Reads TFDS builder folders of RLDS datasets (Open X-Embodiment, Bridge, DROID …).

    A builder folder holds ``dataset_info.json``, ``features.json`` and ``*.tfrecord-*`` shards
    (a dataset folder holding ``X.Y.Z`` version folders is read at its newest version). Each
    record is one episode, a ``tf.train.Example`` (or ``SequenceExample``), and becomes the
    segment ``<split>_episode_<n:06d>``. Records are read one at a time (memory bounded by one
    episode) and each is checked against its CRC32C.

    Args:
        fps: the episodes' step rate, when known: adds a ``timestamp`` (duration) timeline on
            the exact grid ``frame_index * round(1e9 / fps)`` ns. RLDS stores no timestamps and
            TFDS declares no rate, so without it the segments have only ``frame_index``.
        splits: the splits to register (default: every split the metadata lists).

    Use it from Python with :func:`rayform.importers.register_importer`, or ``rayform register
    --fps``.
    """

    name = "rlds"
    options_read = frozenset({"rate_hz"})

    def __init__(self, *, fps: float | None = None, splits: Sequence[str] | None = None) -> None:
        self.fps = check_rate_hz(fps, what="RldsImporter")
        if splits is not None and (isinstance(splits, str) or not all(
                isinstance(s, str) for s in splits)):
            raise ConfigError(f"RldsImporter: splits must be a list of split names, got "
                              f"{splits!r}")
        self.splits = None if splits is None else tuple(splits)

    def configured(self, options: ImportOptions) -> Importer:
        """This importer at ``options.rate_hz`` (``rayform register --fps``), when given."""
        if options.rate_hz is None:
            return self
        return RldsImporter(fps=options.rate_hz, splits=self.splits)

    def sniff(self, path: Path) -> bool:
        return builder_dir(path) is not None

    def convert(self, path: Path, staging: Path) -> list[Path]:
        root = builder_dir(path)
        if root is None:
            raise FormatError(f"{path}: not a TFDS builder folder (no dataset_info.json and "
                              "features.json)")
        info = read_builder_info(root)
        leaves = read_features(root)
        splits = [s for s in info.splits if self.splits is None or s.name in self.splits]
        if self.splits is not None:
            unknown = sorted(set(self.splits) - {s.name for s in info.splits})
            if unknown:
                raise ConfigError(f"{root}: no split {unknown}; splits: "
                                  f"{[s.name for s in info.splits]}")
        for split in splits:
            for shard, _ in split.shards:
                if not shard.is_file():
                    raise FormatError(f"{shard}: missing shard of split {split.name!r} "
                                      "(dataset_info.json lists it); download it completely")
        outputs: list[Path] = []
        for split in splits:
            index = 0
            for shard, expected in split.shards:
                count = 0
                for record, data in enumerate(iter_records(shard)):
                    segment_id = f"{split.name}_episode_{index:06d}"
                    source = EpisodeSource(dataset=info.name, version=info.version,
                                           split=split.name, index=index, shard=shard,
                                           record=record)
                    outputs.append(self._episode(data, staging / f"{segment_id}.rfr",
                                                 segment_id, leaves, source))
                    index += 1
                    count += 1
                if count != expected:
                    raise CorruptRecordingError(
                        f"{shard}: holds {count} records but {info.root / 'dataset_info.json'} "
                        f"says {expected}; the shard is truncated or does not belong here")
        return outputs

    def _episode(self, data: bytes, out: Path, segment_id: str, leaves: list[LeafSpec],
                 source: EpisodeSource) -> Path:
        try:
            parsed = parse_example(data)
        except WireError as err:
            raise CorruptRecordingError(f"{source.where}: not a tf.train.Example ({err})"
                                        ) from err
        return write_episode(out, segment_id, parsed=parsed, leaves=leaves, source=source,
                             rate_hz=self.fps)


