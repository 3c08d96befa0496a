"""``rayform ui``'s server: uvicorn on loopback by default, the URL printed, a browser opened."""

from __future__ import annotations

import ipaddress
import sys
import threading
import warnings
import webbrowser
from dataclasses import dataclass
from typing import Any, TextIO

from rayform._defaults import UI_HOST, UI_PORT
from rayform.errors import ConfigError

DEFAULT_HOST = UI_HOST
DEFAULT_PORT = UI_PORT


class ExposedServerWarning(UserWarning):
    """The UI listens beyond this machine: anyone who reaches the port reads the catalog."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """Where the UI listens, and whether to open a browser on it."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    open_browser: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, got {self.port!r}")
        if not self.host:
            raise ConfigError("host must be an address or name, e.g. 127.0.0.1")

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_exposed(host: str) -> None:
    """Warn when ``host`` is not a loopback address (``--host 0.0.0.0``)."""
    if not is_loopback(host):
        warnings.warn(f"rayform ui listens on {host}, beyond this machine: anyone who can reach "
                      "the port reads every dataset of the catalog and runs SQL over it, with no "
                      "login; use --host 127.0.0.1 (the default) and an SSH tunnel instead",
                      ExposedServerWarning, stacklevel=2)


def serve(app: Any, options: ServeOptions, *, out: TextIO | None = None) -> None:
    """Run ``app`` until interrupted (Ctrl-C), printing its URL once it listens."""
    warn_if_exposed(options.host)
    run_server(app, options, out or sys.stdout)


def run_server(app: Any, options: ServeOptions, stream: TextIO) -> None:
    """uvicorn on ``options.host:port``; prints the URL (the real port when 0 was asked)."""
    import uvicorn

    class Server(uvicorn.Server):
        def startup_message(self) -> None:
            port = options.port
            for server in getattr(self, "servers", []):
                for sock in server.sockets:
                    port = sock.getsockname()[1]
                    break
            url = ServeOptions(host=options.host, port=port, open_browser=False).url
            print(f"rayform ui: {url}  (Ctrl-C stops it)", file=stream, flush=True)
            if options.open_browser:
                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                self.startup_message()

    config = uvicorn.Config(app, host=options.host, port=options.port, log_level="warning",
                            access_log=False, lifespan="off")
    Server(config).run()
