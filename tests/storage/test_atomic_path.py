"""atomic_path: the temporary becomes the destination, or is removed; nothing more is done."""

from __future__ import annotations

from pathlib import Path

import pytest

import rayform._atomic as atomic
from rayform._atomic import atomic_path


def _removals(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    removed: list[Path] = []
    real = atomic._remove

    def remove(tmp: Path) -> None:
        removed.append(tmp)
        real(tmp)

    monkeypatch.setattr(atomic, "_remove", remove)
    return removed


def test_a_replaced_temporary_is_not_looked_for_again(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    removed = _removals(monkeypatch)
    dest = tmp_path / "f"
    with atomic_path(dest) as tmp:
        tmp.write_bytes(b"new")
    assert dest.read_bytes() == b"new"
    assert removed == []
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_failed_block_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            kind: str) -> None:
    removed = _removals(monkeypatch)
    dest = tmp_path / "f"
    dest.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), atomic_path(dest) as tmp:
        if kind == "file":
            tmp.write_bytes(b"half")
        else:
            tmp.mkdir()
            (tmp / "part").write_bytes(b"half")
        raise RuntimeError("boom")
    assert len(removed) == 1
    assert dest.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
