"""A commit whose answer is lost after the server applied it (moto in server mode, the answer
dropped by the client side) is recognised as ours by the retry: register() and create_dataset()
succeed once, with one snapshot, instead of DuplicateSegmentError / EntryExistsError."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from surface_data import write_episode
from test_s3_conditional_writes import moto_endpoint, moto_url  # noqa: F401 (fixtures)

import rayform
from rayform.storage import _s3
from rayform.storage._retry import BACKOFF_ENV


class _LosingAnswers:
    """A boto3 client whose next PUT of a matching key is applied, then answered with a timeout."""

    def __init__(self, client: Any, part: str) -> None:
        self._client, self._part, self.dropped = client, part, 0

    def put_object(self, **kwargs: Any) -> Any:
        reply = self._client.put_object(**kwargs)
        if self._part in kwargs["Key"] and not self.dropped:
            from botocore.exceptions import ReadTimeoutError

            self.dropped += 1
            raise ReadTimeoutError(endpoint_url="http://moto (answer dropped)")
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def arm(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], _LosingAnswers]:
    """``arm(part)``: from now on, S3 clients drop the answer of the next PUT of a key with
    ``part`` in it (the server has applied it)."""
    real = _s3._client_for
    monkeypatch.setenv(BACKOFF_ENV, "0.01")

    def armed(part: str) -> _LosingAnswers:
        proxy: dict[str, _LosingAnswers] = {}

        def client_for(*args: Any) -> Any:
            if "p" not in proxy:
                proxy["p"] = _LosingAnswers(real(*args), part)
            return proxy["p"]

        monkeypatch.setattr(_s3, "_client_for", client_for)
        return _Handle(proxy)  # type: ignore[return-value]

    return armed


class _Handle:
    def __init__(self, proxy: dict[str, _LosingAnswers]) -> None:
        self._proxy = proxy

    @property
    def dropped(self) -> int:
        return self._proxy["p"].dropped if "p" in self._proxy else 0


def test_a_lost_answer_to_a_snapshot_put_is_not_a_duplicate(
        moto_url: str, tmp_path: Path, arm: Callable[[str], _LosingAnswers]) -> None:  # noqa: F811
    catalog = rayform.Catalog.create(moto_url)
    dataset = catalog.create_dataset("robots")
    path = write_episode(tmp_path / "ep0.rfr", "ep0", seed=0)
    proxy = arm("/versions/")
    dataset.register(path).wait()
    assert proxy.dropped == 1
    fresh = rayform.Catalog.open(moto_url).get_dataset("robots")
    assert fresh.segment_ids() == ["ep0"]


def test_a_lost_answer_to_an_entry_put_is_not_an_existing_entry(
        moto_url: str, arm: Callable[[str], _LosingAnswers]) -> None:  # noqa: F811
    catalog = rayform.Catalog.create(moto_url)
    proxy = arm("entry.json")
    catalog.create_dataset("robots")
    assert proxy.dropped == 1
    assert rayform.Catalog.open(moto_url).dataset_names() == ["robots"]
