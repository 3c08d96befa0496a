"""RLDS / TFDS builder folders (TFRecord shards of ``tf.train.Example``), read without TensorFlow."""

from __future__ import annotations

from rayform.importers.rlds._importer import RldsImporter

__all__ = ["RldsImporter"]
