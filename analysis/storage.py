"""Where a logdir's files live: the local disk, or any fsspec URL (`s3://`, `gs://`, `az://`, `hdfs://`, ...).

The reader asks a storage to list a run's event files, stat one, open one and fingerprint what it read;
decoding is the same kernel either way. `LocalStorage` is a thin layer over `os` (today's fast path).
`RemoteStorage` lists the whole prefix in one call (`fs.find`, with each object's size and ETag: object
stores are slow to walk), serves stats from that listing, and reads by large ranged reads (one request per
`decode.CHUNK_BYTES` window). Errors come out as `StorageError`, an OSError whose text is one clear line.
"""

from __future__ import annotations

import copy
import os
import posixpath
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .names import is_event_file

#: Seconds to open a connection to an object store, and to wait for the bytes of one response, before the
#: attempt fails; and attempts per request, by botocore and again by s3fs (2 x 2). A store that refuses
#: connections is one line in seconds; one that accepts and never answers, in at most 4 x 15 s: never a hang.
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 15
ATTEMPTS = 2
#: The packages that read each protocol, and where to get them: the `remote` extra brings the common ones.
BACKENDS = {
    "s3": ("s3fs", "pip install 'tbtriage[remote]'"),
    "s3a": ("s3fs", "pip install 'tbtriage[remote]'"),
    "gs": ("gcsfs", "pip install 'tbtriage[remote]'"),
    "gcs": ("gcsfs", "pip install 'tbtriage[remote]'"),
    "az": ("adlfs", "pip install adlfs"),
    "abfs": ("adlfs", "pip install adlfs"),
    "abfss": ("adlfs", "pip install adlfs"),
    "hdfs": ("pyarrow", "pip install pyarrow"),
}
#: Protocols whose first path component is a bucket (or container), which can be missing on its own.
BUCKETS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*(::[a-zA-Z][a-zA-Z0-9+.-]*)*://|^[a-zA-Z][a-zA-Z0-9+.-]*::")
#: Bytes of the last window read from a file that are kept for its fingerprint (see RemoteStorage.fingerprint),
#: and how many files keep them at once: reading and fingerprinting a file are back to back, so a few suffice.
_KEEP_TAIL = 64 << 10
_KEEP_FILES = 64


class StorageError(OSError):
    """A store could not be listed or read; `str()` is one line naming the URL and the problem."""


def is_url(path: Any) -> bool:
    """Whether `path` is an fsspec URL (`s3://...`, `simplecache::s3://...`) rather than a local path."""
    return isinstance(path, str) and bool(_URL.match(path)) and not re.match(r"^[a-zA-Z]:[\\/]", path)


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any]:
    """`--storage-option KEY=VALUE` pairs as fsspec storage options; ValueError (one line) on a bad pair.

    Values are JSON when they parse as JSON (`anon=true`, `client_kwargs={"region_name": "eu-west-1"}`),
    text otherwise; a dotted key nests (`client_kwargs.endpoint_url=http://...`).
    """
    import json

    options: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option {pair!r}: expected KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        *parents, leaf = key.split(".")
        node = options
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--storage-option {pair!r}: {part} is already a value, not a group of options")
        node[leaf] = value
    return options


@dataclass(frozen=True)
class FileStat:
    """What the reader needs to know about a file before reading it."""

    size: int
    #: Local files: (device, inode), so a file replaced under the same name is told apart. None on object stores,
    #: where an object that grew is a new object anyway: there `version` (the ETag) says whether it changed.
    identity: tuple | None = None
    version: str | None = None


class LocalStorage:
    """Files on this machine: plain `os` calls, exactly what the reader did before storages existed."""

    objects = False  # files grow in place; a shorter file was truncated or rewritten

    def join(self, directory, name: str) -> Path:
        return Path(directory) / name

    def url(self, path) -> str:
        return str(path)

    def config_texts(self, directory) -> dict[str, str]:
        """Nothing read ahead: a local run's config files are read from its directory when the report needs
        them (`run_config.run_hparams`), so they are as fresh as the disk."""
        return {}

    def list_files(self, directory, names: set[str] | None = None) -> list[str]:
        """Names of the event files directly in `directory`, sorted; OSError when it cannot be listed. `names`, when
        given, gets every name in `directory` from the same listing (the config files beside the events)."""
        with os.scandir(directory) as it:
            entries = list(it)
        if names is not None:
            names.update(e.name for e in entries)
        return sorted(e.name for e in entries if is_event_file(e.name) and _is_file(e))

    def is_file(self, path) -> bool:
        return Path(path).is_file()

    def stat(self, path) -> FileStat:
        st = os.stat(path)
        return FileStat(st.st_size, (st.st_dev, st.st_ino))

    def open(self, path):
        return open(path, "rb")

    def fingerprint(self, path, offset: int, n: int) -> bytes | None:
        """The first and the last `n` bytes of the file's first `offset` bytes (None when it cannot be read)."""
        n = min(n, offset)
        try:
            with open(path, "rb") as f:
                head = f.read(n)
                f.seek(offset - n)
                return head + f.read(n)
        except OSError:
            return None


LOCAL = LocalStorage()


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


class RemoteStorage:
    """A logdir behind an fsspec URL: listed in one call, read by ranges.

    Paths are the store's own (`bucket/prefix/run/file`); `url(path)` gives them back as URLs for messages.
    The listing taken by `find_runs` answers `list_files` and `stat` until the next `find_runs`: one
    request per refresh for the whole tree, however many runs.
    """

    objects = True  # an object is rewritten whole: growth shows as a new size and ETag

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        self.url_arg = url
        self.options = dict(storage_options or {})
        self.fs, self.root = open_filesystem(url, self.options)
        self.protocol = url.split("://", 1)[0] if "://" in url else url.split("::", 1)[0]
        self._listing: dict[str, dict[str, FileStat]] = {}  # directory -> event file name -> stat
        self._configs: dict[str, dict[str, FileStat]] = {}  # directory -> config file name -> stat (run_config)
        self._config_texts: dict[tuple[str, str | None], str] = {}  # (path, version) -> text, read once
        self._recent: OrderedDict[str, tuple[str | None, bytes, int, bytes]] = OrderedDict()  # see fingerprint
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a Dask worker: the URL and options rebuild the filesystem there (fsspec instances are
        # cached per process); the listing travels, the read-side memory does not.
        return {"url_arg": self.url_arg, "options": self.options, "_listing": self._listing, "_configs": self._configs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url_arg"], state["options"])  # type: ignore[misc]
        self._listing = state["_listing"]
        self._configs = state.get("_configs", {})

    # -- names ----------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        """A store path as a URL (what the user would type)."""
        rel = posixpath.relpath(path, self.root) if path != self.root else "."
        return self.url_arg.rstrip("/") if rel == "." else f"{self.url_arg.rstrip('/')}/{rel}"

    def join(self, directory: str, name: str) -> str:
        return f"{directory.rstrip('/')}/{name}"

    # -- listing --------------------------------------------------------------------------------
    def kind(self) -> str:
        """'file', 'directory' or 'missing' for the URL itself (one request)."""
        try:
            self.fs.invalidate_cache(self.root)  # fsspec shares filesystems (and their listings) within a process
            info = self.fs.info(self.root)
        except FileNotFoundError:
            return "missing"
        except Exception as exc:  # noqa: BLE001 - every backend's errors become one line
            raise self.error(exc) from None
        return "file" if info.get("type") == "file" else "directory"

    def missing(self) -> str:
        """Why the URL names nothing: its bucket does not exist, or nothing is under the prefix."""
        bucket = self.root.split("/", 1)[0]
        if self.protocol in BUCKETS and bucket and bucket != self.root.rstrip("/"):
            try:
                if not self.fs.exists(bucket):
                    return f"no such bucket {bucket!r}"
            except Exception as exc:  # noqa: BLE001
                raise self.error(exc) from None
        return "no such object or prefix"

    def find_runs(self, warnings: list[str] | None = None) -> dict[str, str]:
        """Map run name -> directory for every directory holding an event file, from one listing of the prefix."""
        from .discover import runs_from_listing

        try:
            self.fs.invalidate_cache(self.root)  # a refresh must see what was written since the last listing
            found = self.fs.find(self.root, withdirs=False, detail=True)
        except FileNotFoundError:
            found = {}
        except Exception as exc:  # noqa: BLE001
            raise self.error(exc) from None
        from .run_config import CONFIG_FILES, EXTRA_CONFIG_FILES

        listing: dict[str, dict[str, FileStat]] = {}
        configs: dict[str, dict[str, FileStat]] = {}
        for path, info in found.items():
            directory, name = posixpath.split(path.rstrip("/"))
            if info.get("type", "file") != "file":
                continue
            if is_event_file(name):
                listing.setdefault(directory, {})[name] = _stat_of(info)
            elif name in CONFIG_FILES or name in EXTRA_CONFIG_FILES:
                configs.setdefault(directory, {})[name] = _stat_of(info)
        self._listing, self._configs = listing, configs
        return runs_from_listing(self.root.rstrip("/"), listing)

    def list_single(self) -> tuple[str, str]:
        """(directory, name) of the URL when it names one event file, its stat put in the listing."""
        try:
            self.fs.invalidate_cache(self.root)  # a refresh must see the object as it is now
            info = self.fs.info(self.root)
        except Exception as exc:  # noqa: BLE001
            raise self.error(exc) from None
        directory, name = posixpath.split(self.root.rstrip("/"))
        self._listing = {directory: {name: _stat_of(info)}}
        return directory, name

    def seed(self, directory: str, files: dict[str, FileStat]) -> None:
        """Take a run's files from a listing made elsewhere (a Dask worker is given its runs' listing)."""
        self._listing[directory] = dict(files)

    def subset(self, directories: list[str]) -> RemoteStorage:
        """This store knowing only these directories' listing: what a Dask task ships to its worker."""
        part = copy.copy(self)
        part._listing = {d: self._listing.get(d, {}) for d in directories}
        part._configs = {d: self._configs[d] for d in directories if d in self._configs}
        part._config_texts = {}
        part._recent, part._lock = OrderedDict(), threading.Lock()
        return part

    def list_files(self, directory: str) -> list[str]:
        return sorted(self._listing.get(directory, {}))

    def is_file(self, path: str) -> bool:
        directory, name = posixpath.split(path)
        return name in self._listing.get(directory, {})

    def stat(self, path: str) -> FileStat:
        directory, name = posixpath.split(path)
        try:
            return self._listing[directory][name]
        except KeyError:
            raise FileNotFoundError(2, "no such object", self.url(path)) from None

    def config_texts(self, directory: str) -> dict[str, str]:
        """The text of each config file beside a run's events (`run_config`), each version read once;
        files over `run_config.MAX_CONFIG_BYTES` or unreadable are left out, as locally."""
        from .run_config import MAX_CONFIG_BYTES

        out = {}
        for name, stat in self._configs.get(directory, {}).items():
            if stat.size > MAX_CONFIG_BYTES:
                continue
            path = self.join(directory, name)
            key = (path, stat.version)
            if key not in self._config_texts:
                try:
                    self._config_texts[key] = self.read_range(path, 0, stat.size).decode("utf-8", "replace")
                except OSError:
                    continue
            out[name] = self._config_texts[key]
        return out

    # -- reading --------------------------------------------------------------------------------
    def open(self, path: str) -> _RangeFile:
        stat = self.stat(path)
        return _RangeFile(self, path, stat.size, stat.version)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object, in one ranged request."""
        try:
            return self.fs.cat_file(path, start=start, end=end)
        except Exception as exc:  # noqa: BLE001
            raise self.error(exc, path) from None

    def _remember(self, path: str, version: str | None, head: bytes, start: int, data: bytes) -> None:
        with self._lock:
            self._recent[path] = (version, head, start + len(data) - min(len(data), _KEEP_TAIL), data[-_KEEP_TAIL:])
            self._recent.move_to_end(path)
            while len(self._recent) > _KEEP_FILES:
                self._recent.popitem(last=False)

    def fingerprint(self, path: str, offset: int, n: int) -> bytes | None:
        """`LocalStorage.fingerprint` for an object: from the bytes the last read of it kept, when they cover
        it (a file is fingerprinted right after it is read) and are of the object the listing names now (one
        that changed since must be read: that is the point of the check), else by ranged reads."""
        n = min(n, offset)
        with self._lock:
            kept = self._recent.pop(path, None)
        try:
            if kept is not None and kept[0] is not None and kept[0] == self._version(path):
                _, head, tail_start, tail = kept
                if len(head) >= n and tail_start <= offset - n and offset <= tail_start + len(tail):
                    return head[:n] + tail[offset - n - tail_start : offset - tail_start]
            if offset <= 2 * n:
                data = self.read_range(path, 0, offset)
                return data[:n] + data[offset - n :]
            return self.read_range(path, 0, n) + self.read_range(path, offset - n, offset)
        except OSError:
            return None

    def _version(self, path: str) -> str | None:
        try:
            return self.stat(path).version
        except OSError:
            return None

    # -- errors ---------------------------------------------------------------------------------
    def error(self, exc: BaseException, path: str | None = None) -> StorageError:
        """`exc` from the backend as one line naming the URL."""
        where = self.url(path) if path is not None else self.url_arg
        return StorageError(f"{where}: {describe(exc, self.protocol, self.options)}")


class _RangeFile:
    """The file interface `decode.scan_file` uses (seek, read, readinto), over ranged requests of one object."""

    def __init__(self, storage: RemoteStorage, path: str, size: int, version: str | None):
        self.storage, self.path, self.size, self.version, self.pos = storage, path, size, version, 0
        self.head = b""

    def seek(self, pos: int) -> int:
        self.pos = pos
        return pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = self.storage.read_range(self.path, self.pos, end)
        if self.pos == 0:
            self.head = bytes(data[:64])
        self.storage._remember(self.path, self.version, self.head, self.pos, data)
        self.pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def close(self) -> None:
        pass

    def __enter__(self) -> _RangeFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stat_of(info: dict[str, Any]) -> FileStat:
    version = info.get("ETag") or info.get("etag") or info.get("generation") or info.get("LastModified")
    version = version or info.get("mtime") or info.get("last_modified")
    return FileStat(int(info.get("size") or 0), None, None if version is None else str(version))


def default_options(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The user's storage options plus our timeouts where the user set none (see CONNECT_TIMEOUT_S)."""
    out = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(out.get("config_kwargs") or {})
        config.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        config.setdefault("read_timeout", READ_TIMEOUT_S)
        config.setdefault("retries", {"max_attempts": ATTEMPTS, "mode": "standard"})
        out["config_kwargs"] = config
    return out


def open_filesystem(url: str, options: dict[str, Any]):
    """(filesystem, root path) for an fsspec URL; StorageError (one line) when its backend is missing."""
    chain = url.split("://", 1)[0].split("::")
    protocol = chain[-1]
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError:
        raise StorageError(f"{url}: reading URLs needs the remote extra: pip install 'tbtriage[remote]'") from None
    if protocol in ("s3", "s3a") and len(chain) == 1:
        options = default_options(protocol, options)
    try:
        fs, root = url_to_fs(url, **options)
        if protocol in ("s3", "s3a") and hasattr(fs, "retries") and "retries" not in options:
            fs.retries = ATTEMPTS  # s3fs retries again on top of botocore; bound the total wait
    except ImportError:
        package, how = BACKENDS.get(protocol, (protocol, "pip install 'tbtriage[remote]'"))
        raise StorageError(f"{url}: reading {protocol}:// URLs needs {package}: {how}") from None
    except ValueError as exc:
        if protocol not in fsspec.available_protocols():
            raise StorageError(f"{url}: unknown storage protocol {protocol!r}") from None
        raise StorageError(f"{url}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a backend rejecting its options is bad input, one line
        raise StorageError(f"{url}: {describe(exc, protocol)}") from None
    return fs, root


def _timeouts(protocol: str, options: dict[str, Any]) -> str:
    """The timeouts in force, as a person reads them ("connect timeout 5 s, read timeout 15 s, 2 attempts")."""
    if protocol not in ("s3", "s3a"):
        return "the backend's own timeouts"
    config = default_options(protocol, options)["config_kwargs"]
    attempts = (config.get("retries") or {}).get("max_attempts", ATTEMPTS)
    return f"connect timeout {config['connect_timeout']:g} s, read timeout {config['read_timeout']:g} s, {attempts} attempts"


def describe(exc: BaseException, protocol: str = "", options: dict[str, Any] | None = None) -> str:
    """A backend's exception as the one line a person can act on (no credentials, no bucket, denied, network)."""
    name = type(exc).__name__
    text = " ".join(str(exc).split())[:200]
    names = {c.__name__ for c in type(exc).__mro__}
    if "NoCredentialsError" in names or "PartialCredentialsError" in names or "DefaultCredentialsError" in names:
        hint = (
            " (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a profile, or --storage-option key=... "
            "--storage-option secret=...; anon=true for a public bucket)"
            if protocol.startswith("s3")
            else ""
        )
        return f"no credentials found{hint}"
    if isinstance(exc, FileNotFoundError):
        if "bucket" in text.lower():
            return "no such bucket"
        return "no such object or prefix"
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "InvalidAccessKeyId" in text:
        code = next((c for c in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied") if c in text), "")
        return f"access denied{f' ({code})' if code else ''}: check the credentials and the bucket's policy"
    if "Timeout" in name or "timed out" in text.lower() or isinstance(exc, TimeoutError):
        return f"the store did not answer in time ({name}; {_timeouts(protocol, options or {})})"
    if "Connect" in name or "Connection" in name or isinstance(exc, ConnectionError):
        return f"cannot reach the store ({name}: {text}; {_timeouts(protocol, options or {})})"
    return f"{name}: {text}" if text else name
