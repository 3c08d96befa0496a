"""A TCP proxy on loopback that loses the answers of chosen requests after the server got them.

``AnswerDropper(upstream_port)`` forwards every connection to ``127.0.0.1:upstream_port``. While
``drop_next > 0``, a request whose request line starts with ``method`` and contains ``marker``
reaches the server whole; the server applies it and answers, and the proxy closes the client's
connection instead of passing that answer on (an interim ``100 Continue`` still passes, so the
client sends its body). To the client this is a request that timed out after the server
applied it: the lost answer a retried conditional write must recognise as its own.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field

_CONTINUE = b"HTTP/1.1 100"


@dataclass
class _Connection:
    client: socket.socket
    upstream: socket.socket
    losing: bool = False  # the answer now on its way is to be lost
    lock: threading.Lock = field(default_factory=threading.Lock)


class AnswerDropper:
    """See the module docstring; ``dropped`` counts the answers lost."""

    def __init__(self, upstream_port: int, *, method: bytes = b"PUT",
                 marker: bytes = b"") -> None:
        self.upstream_port = upstream_port
        self.method, self.marker = method, marker
        self.drop_next = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._open: list[_Connection] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, marker: bytes, *, count: int = 1) -> None:
        """Lose the answers of the next ``count`` requests whose request line has ``marker``."""
        with self._lock:
            self.marker, self.drop_next = marker, count

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            conn = _Connection(client, upstream)
            self._open.append(conn)
            threading.Thread(target=self._requests, args=(conn,), daemon=True).start()
            threading.Thread(target=self._answers, args=(conn,), daemon=True).start()

    def _requests(self, conn: _Connection) -> None:
        with contextlib.suppress(OSError):
            while data := conn.client.recv(65536):
                line = data.split(b"\r\n", 1)[0]
                if line.startswith(self.method + b" "):
                    with self._lock:
                        if self.drop_next > 0 and self.marker in line:
                            self.drop_next -= 1
                            self.dropped += 1
                            with conn.lock:
                                conn.losing = True
                conn.upstream.sendall(data)
        with contextlib.suppress(OSError):
            conn.upstream.shutdown(socket.SHUT_WR)

    def _answers(self, conn: _Connection) -> None:
        with contextlib.suppress(OSError):
            while data := conn.upstream.recv(65536):
                with conn.lock:
                    losing = conn.losing
                if losing:
                    while data.startswith(_CONTINUE):  # interim answers still pass
                        head, _, data = data.partition(b"\r\n\r\n")
                        conn.client.sendall(head + b"\r\n\r\n")
                    if data:
                        break  # the final answer: lost, and the connection with it
                    continue
                conn.client.sendall(data)
        self._close(conn)

    def _close(self, conn: _Connection) -> None:
        for s in (conn.client, conn.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._server.close()
        for conn in self._open:
            self._close(conn)
