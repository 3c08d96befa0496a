"""A fuzz harness over rayform's importers and SQL, run in a child process so a crash is counted.

Importer cases mutate the real recordings of ``../shared/realdata`` (and a native ``.rfr``
written here): truncations, bit flips and wrong-typed metadata values, each a pure function of
its seed. Each case is registered into a fresh catalog and classified:

- ``error``: a rayform error (``RayformError``), the clear refusal;
- ``identical``: accepted, and the registered data equals the unmutated source's;
- ``warned``: accepted with other data and a ``ConversionWarning`` the clean source does not
  give (the importer said what it changed or dropped);
- ``changed``: accepted with other data, allowed only for byte mutations of formats that carry
  no checksum of their payload (a flipped pixel in an MP4 cannot be detected);
- ``other``: anything else — a raw exception, a case past its time bound, or wrong-typed
  metadata accepted with other data. A failure.

SQL cases are hostile statements; each must be ``error`` (``QueryError``) or run (``identical``).
A child that dies leaves its unfinished cases ``other``.

Usage: ``python fuzz_harness.py importers|sql SEED COUNT`` prints one JSON line per case.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata"
CASE_LIMIT_S = 60.0


@dataclass(frozen=True)
class Source:
    name: str
    path: Path  # a file or a folder, copied into each case's folder
    target: str  # the file inside it that mutations touch ("" for the file itself)
    kind: str  # "bytes" (a payload format) or "checked" (carries checksums)
    metadata: str = ""  # a JSON/YAML metadata file inside the folder, for wrong types


def sources(work: Path) -> list[Source]:
    """The recordings to fuzz: those of realdata that exist, and a native file made here."""
    import numpy as np

    from rayform.catalog import RecordingWriter

    native = work / "native" / "ep.rfr"
    native.parent.mkdir(parents=True, exist_ok=True)
    with RecordingWriter(native, recording_id="ep") as rec:
        rec.set_properties(task="pick", success=True)
        rec.log_scalars("/joints", timelines={"frame_index": np.arange(20)},
                        values=np.arange(60, dtype=np.float64).reshape(20, 3))
    found = [Source("rfr", native, "", "checked")]
    candidates = [
        Source("mcap", REALDATA / "evo-nav2-turtlebot-mcap" / "nav2_turtlebot.mcap", "", "bytes"),
        Source("mp4", REALDATA / "intel-sample-videos" / "bottle-detection.mp4", "", "bytes"),
        Source("rosbag2", REALDATA / "rosbag2-test-bags" / "talker", "", "bytes",
               metadata="metadata.yaml"),
        Source("lerobot", REALDATA / "unitree-g1-lerobot-v21",
               "data/chunk-000/episode_000029.parquet", "bytes", metadata="meta/info.json"),
    ]
    return found + [s for s in candidates if s.path.exists()]


def _copy(source: Source, into: Path) -> Path:
    dest = into / source.path.name
    if source.path.is_dir():
        shutil.copytree(source.path, dest, ignore=shutil.ignore_patterns("LICENSE*"))
    else:
        shutil.copy2(source.path, dest)
    return dest


def _target(source: Source, copy: Path) -> Path:
    if source.target:
        return copy / source.target
    if copy.is_dir():
        return sorted(p for p in copy.iterdir() if p.suffix in (".mcap", ".db3"))[0]
    return copy


def truncate(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    keep = rng.randrange(len(data))
    path.write_bytes(data[:keep])
    return f"truncate {path.name} to {keep} of {len(data)} bytes"


def flip(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    offsets = sorted(rng.randrange(len(data)) for _ in range(rng.choice((1, 1, 4))))
    for at in offsets:
        data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return f"flip bits of {path.name} at {offsets}"


_WRONG: list[Any] = ["P", 10**30, -1, 0.5, float("nan"), None, [], {}, [1, "x"], True,
                     "x" * 100_000, "{episode_index:0999999999d}", "../../escape"]


def _leaves(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _leaves(v, (*at, i))


def wrong_type(path: Path, rng: random.Random) -> str:
    text = path.read_text()
    is_yaml = path.suffix == ".yaml"
    if is_yaml:
        import yaml

        doc = yaml.safe_load(text)
    else:
        doc = json.loads(text)
    where = rng.choice([p for p in _leaves(doc) if p])
    node = doc
    for key in where[:-1]:
        node = node[key]
    original = node[where[-1]]
    # Another type than the value had (a string for a string would be a legal edit, not a fuzz).
    value = rng.choice([w for w in _WRONG if type(w) is not type(original)])
    node[where[-1]] = value
    path.write_text(yaml.safe_dump(doc) if is_yaml else json.dumps(doc))
    return f"{path.name}: {'.'.join(map(str, where))} = {str(value)[:40]!r}"


def fingerprint(dataset: Any) -> str:
    """A digest of what a dataset holds: every segment's recording tables and properties."""
    import pyarrow as pa

    digest = hashlib.sha256()
    for segment_id in sorted(dataset.segment_ids()):
        digest.update(segment_id.encode())
        for header, table in dataset.open_segment(segment_id).files():
            digest.update(json.dumps(sorted(header.properties.items()), default=str).encode())
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            digest.update(sink.getvalue().to_pybytes())
    return digest.hexdigest()


def _register(copy: Path, catalog_dir: Path) -> tuple[str, set[str]]:
    """The fingerprint of ``copy`` registered, and its conversion warnings (folder-free)."""
    from rayform.catalog import Catalog
    from rayform.errors import ConversionWarning

    catalog = Catalog.create(catalog_dir)
    dataset = catalog.create_dataset("fuzz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        dataset.register(copy)
    said = {str(w.message).replace(str(copy.parent), "") for w in caught
            if issubclass(w.category, ConversionWarning)}
    return fingerprint(dataset), said


def importer_cases(seed: int, count: int) -> Iterator[dict[str, Any]]:
    from rayform.errors import RayformError

    work = Path(tempfile.mkdtemp(prefix="rayform-fuzz-"))
    try:
        found = sources(work)
        truth: dict[str, tuple[str, set[str]]] = {}
        for source in found:
            clean = work / f"clean-{source.name}"
            clean.mkdir()
            truth[source.name] = _register(_copy(source, clean), clean / "catalog")
        mutations: list[tuple[str, Callable[[Path, random.Random], str]]] = [
            ("truncate", truncate), ("flip", flip), ("wrong_type", wrong_type)]
        for case in range(count):
            rng = random.Random(seed * 1_000_003 + case)
            source = found[case % len(found)]
            kinds = [m for m in mutations if m[0] != "wrong_type" or source.metadata]
            kind, mutate = kinds[(case // len(found)) % len(kinds)]
            folder = work / f"case-{case}"
            folder.mkdir()
            copy = _copy(source, folder)
            target = copy / source.metadata if kind == "wrong_type" else _target(source, copy)
            what = mutate(target, rng)
            started = time.monotonic()
            try:
                got = _register(copy, folder / "catalog")
            except RayformError as err:
                outcome, detail = "error", f"{type(err).__name__}: {str(err)[:200]}"
            except Exception as err:
                outcome = "other"
                detail = f"{type(err).__name__}: {str(err)[:200]} " + "".join(
                    traceback.format_tb(err.__traceback__)[-2:])[-400:]
            else:
                (digest, said), (clean_digest, clean_said) = got, truth[source.name]
                if digest == clean_digest:
                    outcome, detail = "identical", ""
                elif said - clean_said:
                    outcome, detail = "warned", sorted(said - clean_said)[0][:200]
                elif kind != "wrong_type" and source.kind == "bytes":
                    outcome, detail = "changed", ""
                else:
                    outcome, detail = "other", "accepted with other data and no warning"
            elapsed = time.monotonic() - started
            if elapsed > CASE_LIMIT_S:
                outcome, detail = "other", f"took {elapsed:.0f} s (limit {CASE_LIMIT_S:.0f} s)"
            shutil.rmtree(folder, ignore_errors=True)
            yield {"case": case, "source": source.name, "mutation": kind, "what": what,
                   "outcome": outcome, "detail": detail, "seconds": round(elapsed, 2)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


HOSTILE_SQL: list[str] = [
    "SELECT " + " + ".join(["1"] * 10_000),
    "SELECT * FROM fuzz.segments WHERE " + " OR ".join(["true"] * 10_000),
    "SELECT " + "(" * 5000 + "1" + ")" * 5000,
    "SELECT 1" + " " * (10 << 20),
    "SELECT " + " || ".join(["'a'"] * 5000),
    "SELECT NOT " * 3000 + "true",
    "CREATE EXTERNAL TABLE p (l VARCHAR) STORED AS CSV LOCATION '/etc/passwd'",
    "COPY (SELECT 1) TO '/tmp/rayform-fuzz-out.csv' STORED AS CSV",
    "SET datafusion.execution.batch_size = 1",
    "DROP TABLE fuzz.segments",
    "SELECT * FROM fuzz.\"/../../etc\"",
    "SELECT * FROM \"../x\".segments",
    "SELECT 1/0",
    "SELECT CAST('x' AS INT)",
    "SELECT $1",
    "SELECT * FROM fuzz.segments WHERE rerun_segment_id = '\x00'",
    "SELECT count(*) FROM range(100000) a, range(100000) b",
    "SELECT value FROM range(100000000) ORDER BY value DESC",
    "SELECT array_length(array_repeat(1, 100000))",
    "SELECT 'unterminated",
    "SELECT \"",
    ";;;",
    "",
    "SELECT * FROM fuzz.segments; DROP TABLE x",
    "\u202eSELECT 1",
]


def sql_cases(seed: int, count: int) -> Iterator[dict[str, Any]]:
    from rayform.catalog import Catalog
    from rayform.errors import QueryError

    work = Path(tempfile.mkdtemp(prefix="rayform-fuzz-sql-"))
    try:
        catalog = Catalog.create(work / "catalog")
        sources(work)  # writes the native recording
        catalog.create_dataset("fuzz").register(work / "native" / "ep.rfr")
        rng = random.Random(seed)
        statements = list(HOSTILE_SQL)
        rng.shuffle(statements)
        for case, query in enumerate(statements[:count]):
            started = time.monotonic()
            try:
                catalog.sql(query, timeout_s=5).to_arrow_table()
            except QueryError as err:
                outcome, detail = "error", str(err)[:160]
            except Exception as err:
                outcome, detail = "other", f"{type(err).__name__}: {str(err)[:200]}"
            else:
                outcome, detail = "identical", "ran"
            yield {"case": case, "source": "sql", "mutation": "hostile", "what": query[:80],
                   "outcome": outcome, "detail": detail,
                   "seconds": round(time.monotonic() - started, 2)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    suite, seed, count = argv[0], int(argv[1]), int(argv[2])
    warnings.simplefilter("ignore")
    cases = importer_cases if suite == "importers" else sql_cases
    for result in cases(seed, count):
        print(json.dumps(result), flush=True)
    return 0


def run_child(suite: str, *, seed: int, count: int, timeout_s: float) -> list[dict[str, Any]]:
    """The cases of ``suite`` run in a child process; cases it did not finish are ``other``."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")]), "RAYFORM_SQL_MEMORY_BYTES": str(1 << 30)}
    try:
        done = subprocess.run([sys.executable, __file__, suite, str(seed), str(count)],
                              capture_output=True, text=True, timeout=timeout_s, env=env)
        out, code, err = done.stdout, done.returncode, done.stderr
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (
            expired.stdout or "")
        code, err = -1, f"timed out after {timeout_s} s"
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if code != 0 or len(results) < count:
        expected = count if suite == "importers" else min(count, len(HOSTILE_SQL))
        for case in range(len(results), expected):
            results.append({"case": case, "source": suite, "mutation": "?", "what": "",
                            "outcome": "other",
                            "detail": f"child exited {code}: {err[-300:]}", "seconds": 0})
    return results


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
