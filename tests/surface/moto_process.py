"""moto's S3 server in a process of its own (as a real server is: its work never shares the
test's interpreter, and a writer killed in the test leaves it running), and a bucket on it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator

SERVER = textwrap.dedent("""
    import sys
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    print(server.get_host_and_port()[1], flush=True)
    sys.stdin.read()  # until the test closes our stdin
    server.stop()
""")

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def moto_server_process() -> Iterator[str]:
    """Start ``moto`` in a child process; yields its endpoint ``http://127.0.0.1:PORT``."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"moto server did not start (said {port!r})")
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def create_bucket(endpoint: str, name: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, **{
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"]})
    client.create_bucket(Bucket=name)
    client.close()
