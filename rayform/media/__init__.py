"""Media: codec-level work without torch — video bitstreams, probing, encoding, frame and image decoding.

Used alike by the importers (probing MP4s, flagging keyframes), the exporters (re-encoding video)
and the torch decoders. PyAV, simplejpeg and Pillow are optional and imported on use; a missing
one raises ``ImportError`` naming the ``pip install 'rayform[...]'`` to run.
"""

from __future__ import annotations

from rayform.media._image import decode_image, decode_image_planes
from rayform.media._video_asset import VideoAssetInfo, probe_video_asset
from rayform.media._video_encode import (
    available_video_codecs,
    encode_video_packets,
    write_video_mp4,
)

__all__ = [
    "VideoAssetInfo",
    "available_video_codecs",
    "decode_image",
    "decode_image_planes",
    "encode_video_packets",
    "probe_video_asset",
    "write_video_mp4",
]
