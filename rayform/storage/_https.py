"""Read-only catalogs served by any static web server over HTTPS (or plain HTTP on a trusted net).

Web servers cannot list folders, so the catalog's listing files (``.listing.json``, written by every
local catalog, see :mod:`rayform.storage._listing`) stand in for listings. TLS certificates are
checked against the system's trust store, ``SSL_CERT_FILE``, or ``RAYFORM_CA_BUNDLE`` (a PEM file,
for a private certificate authority). One keep-alive connection per thread, opened after a fork.
"""

from __future__ import annotations

import http.client
import os
import ssl
import threading
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

from rayform.errors import CatalogNotFoundError, CorruptMetadataError, RemoteError
from rayform.storage._cache import Sink
from rayform.storage._listing import decode_listing, listing_key
from rayform.storage._parts import RangeReply, parse_content_range
from rayform.storage._remote import Transport
from rayform.storage._retry import RetryPolicy, TransientError, response_timeout_s

CA_BUNDLE_ENV = "RAYFORM_CA_BUNDLE"
CHUNK_BYTES = 1 << 20


class HttpTransport(Transport):
    """GET / HEAD requests below a base URL."""

    writable = False
    ranged = True

    def __init__(self, url: str, *, retry: RetryPolicy) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CatalogNotFoundError(
                f"{url!r} is not an http(s) catalog URL; expected https://host[:port]/path"
            )
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path.rstrip("/")
        self._timeout_s = retry.timeout_s
        self._connect_timeout_s = retry.connect_timeout_s
        self._local = threading.local()
        self._context: ssl.SSLContext | None = None
        self._root_listed: bool | None = None

    # ----------------------------------------------------------------------- connections
    def _ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            bundle = os.environ.get(CA_BUNDLE_ENV) or None
            self._context = ssl.create_default_context(cafile=bundle)
        return self._context

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            connect_s = response_timeout_s(self._connect_timeout_s)
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=connect_s,
                                                   context=self._ssl_context())
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=connect_s)
            self._local.conn = conn
            self._local.pid = os.getpid()
        if conn.sock is None:
            conn.timeout = response_timeout_s(self._connect_timeout_s)
            conn.connect()  # a short connect timeout; reads get their own below
        return conn

    def _set_timeout(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        if conn.sock is not None:
            conn.sock.settimeout(seconds)
        conn.timeout = seconds

    def release_thread(self) -> None:
        """Close the calling thread's connection (a thread about to end: its connection would
        otherwise be left for the garbage collector)."""
        self._drop()

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()
        self._local.conn = None

    def _path(self, key: str) -> str:
        return f"{self._base}/{quote(key, safe='/')}"

    def _request(self, method: str, key: str, *,
                 byte_range: tuple[int, int] | None = None) -> http.client.HTTPResponse:
        where = f"{self.url}/{key}"
        headers = {"Accept-Encoding": "identity"}
        if byte_range is not None:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
        try:
            conn = self._connection()
            # Waiting for the response counts against the operation's deadline; reading the
            # body only against the stall timeout (a large download in progress is not cut).
            self._set_timeout(conn, response_timeout_s(self._timeout_s))
            conn.request(method, self._path(key), headers=headers)
            resp = conn.getresponse()
            self._set_timeout(conn, self._timeout_s)
        except ssl.SSLCertVerificationError as err:
            self._drop()
            raise RemoteError(
                f"{method} {where}: TLS certificate not trusted ({err.verify_message}); point "
                f"{CA_BUNDLE_ENV} or SSL_CERT_FILE at the CA bundle (PEM) that signed it"
            ) from err
        except (OSError, http.client.HTTPException) as err:
            self._drop()
            raise TransientError(f"{method} {where}: {type(err).__name__}: {err}") from err
        if resp.status in (200, 206):
            return resp
        self._finish(resp)
        if resp.status == 404:
            raise FileNotFoundError(f"{where} does not exist (HTTP 404)")
        if resp.status == 429 or resp.status >= 500:
            raise TransientError(f"{method} {where}: HTTP {resp.status} {resp.reason}")
        raise RemoteError(
            f"{method} {where}: HTTP {resp.status} {resp.reason}; check the URL and that the "
            "server lets you read it"
        )

    def _finish(self, resp: http.client.HTTPResponse) -> None:
        try:
            resp.read()
        except (OSError, http.client.HTTPException):
            self._drop()

    # ---------------------------------------------------------------------------- reads
    def download(self, key: str, sink: Sink) -> None:
        resp = self._request("GET", key)
        expected = resp.getheader("Content-Length")
        received = 0
        for chunk in self._chunks(key, resp):
            try:
                sink.write(chunk)  # a local failure (a full disk) is never a network one
            except BaseException:
                self._drop()
                raise
            received += len(chunk)
        if expected is not None and received != int(expected):
            self._drop()
            raise TransientError(
                f"GET {self.url}/{key}: connection closed after {received} of {expected} bytes"
            )

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply:
        """GET bytes ``[start, stop)`` of ``key``, or all of it when ``stop`` is None."""
        what = f"GET {self.url}/{key}" + ("" if stop is None else f" bytes {start}-{stop - 1}")
        resp = self._request("GET", key, byte_range=None if stop is None else (start, stop))
        declared = resp.getheader("Content-Length")
        length = int(declared) if declared is not None and declared.isdigit() else None
        accepts = (resp.getheader("Accept-Ranges") or "").strip().lower() == "bytes"
        if resp.status != 206:  # the whole file (asked for, or a server that ignores ranges)
            return RangeReply(total_bytes=length, start=0, length_bytes=length,
                              accepts_ranges=accepts, chunks=self._chunks(key, resp),
                              close=lambda: self._abandon(resp))
        found = parse_content_range(resp.getheader("Content-Range"), what=what)
        if found is None:
            self._drop()
            raise TransientError(f"{what}: HTTP 206 without a Content-Range")
        return RangeReply(total_bytes=found[2], start=found[0], length_bytes=length,
                          accepts_ranges=True, chunks=self._chunks(key, resp),
                          close=lambda: self._abandon(resp))

    def _chunks(self, key: str, resp: http.client.HTTPResponse) -> Iterator[bytes]:
        """A response body in chunks; a dropped connection raises ``TransientError``."""
        received = 0
        while True:
            try:
                chunk = resp.read(CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as err:
                self._drop()
                raise TransientError(
                    f"GET {self.url}/{key}: connection dropped after {received} bytes: "
                    f"{type(err).__name__}: {err}"
                ) from err
            if not chunk:
                return
            received += len(chunk)
            yield chunk

    def _abandon(self, resp: http.client.HTTPResponse) -> None:
        """A reply whose body was not read to its end cannot share its connection again."""
        if not resp.isclosed():
            self._drop()
            resp.close()  # its socket file too: the socket closes now, not when collected

    def exists(self, key: str) -> bool:
        try:
            resp = self._request("HEAD", key)
        except FileNotFoundError:
            return False
        self._finish(resp)
        return True

    def list_names(self, prefix: str) -> list[str]:
        key = listing_key(prefix)
        try:
            raw = self.get(key)
        except FileNotFoundError:
            if prefix and not self._has_root_listing():
                raise CorruptMetadataError(
                    f"catalog {self.url} has no listing files ({listing_key('')}): it was written "
                    "by an older rayform, or published without its hidden files; run "
                    "`rayform index PATH` (rayform.catalog.index_catalog) on the catalog "
                    "directory and publish it again, dotfiles included"
                ) from None
            return []
        return decode_listing(raw, source=f"{self.url}/{key}")

    def _has_root_listing(self) -> bool:
        if self._root_listed is None:
            self._root_listed = self.exists(listing_key(""))
        return self._root_listed
