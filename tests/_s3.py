"""A real S3 API on 127.0.0.1 for the remote tests: moto's server, started in a thread, and s3fs pointed at it."""

from __future__ import annotations

from pathlib import Path

#: Dummy credentials: moto accepts any unless IAM checking is switched on (see the bad-credentials test).
KEY, SECRET = "testing", "testing"


class S3:
    """A running moto server: its endpoint, storage options that reach it, and an s3fs client."""

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.options = {"endpoint_url": self.endpoint, "key": KEY, "secret": SECRET}
        self.cli_options = [
            "--storage-option",
            f"endpoint_url={self.endpoint}",
            "--storage-option",
            f"key={KEY}",
            "--storage-option",
            f"secret={SECRET}",
        ]
        import s3fs

        # A client of our own, never served from fsspec's instance cache (the reader's may hold listings).
        self.fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **self.options)

    def bucket(self, name: str) -> str:
        if not self.fs.exists(name):
            self.fs.mkdir(name)
        return name

    def upload(self, local: Path, bucket: str, prefix: str) -> str:
        """Copy a local logdir under s3://bucket/prefix; the URL."""
        self.bucket(bucket)
        for path in sorted(p for p in Path(local).rglob("*") if p.is_file()):
            self.fs.pipe_file(f"{bucket}/{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())
        return f"s3://{bucket}/{prefix}"

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.bucket(bucket)
        self.fs.pipe_file(f"{bucket}/{key}", data)

    def stop(self) -> None:
        self.server.stop()
