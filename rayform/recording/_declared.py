"""Properties a recording declares about itself, read whether rayform or rerun-sdk wrote them.

``RecordingWriter.set_property("frame_convention", "ros")`` stores the name as given;
rerun-sdk's ``rec.send_property("frame_convention", rr.AnyValues(text="ros"))`` arrives as
``frame_convention:text`` (Rerun's segment-table column ``property:frame_convention:text``).
Both declare ``frame_convention``.
"""

from __future__ import annotations

from collections.abc import Mapping

from rayform.errors import ConfigError
from rayform.recording._file import PropertyValue


def declared_property(properties: Mapping[str, PropertyValue], name: str, *,
                      segment: str) -> PropertyValue:
    """The value ``properties`` declare for ``name`` (``None`` when none).

    Raises:
        ConfigError: several components of a Rerun property (``name:a``, ``name:b``) disagree.
    """
    if properties.get(name) is not None:
        return properties[name]
    found = {key: value for key, value in properties.items()
             if key.startswith(name + ":") and value is not None}
    if len({repr(value) for value in found.values()}) > 1:  # list values are unhashable
        raise ConfigError(
            f"segment {segment!r} declares {name!r} several times with different values "
            f"{found}; log one value (rec.send_property({name!r}, rr.AnyValues(text=…)))"
        )
    return next(iter(found.values()), None)
