"""Validate a GGUF model file before llama.cpp sees it, and read the few metadata keys we show.

llama.cpp's own failure on a bad file is a NULL model plus log lines on stderr; llama-cpp-python
turns that into a generic "Failed to load model". Checking the header, the metadata and the
tensor table ourselves gives one clear line naming the file and the problem (not a GGUF file,
unsupported version, truncated at byte N) and costs a few milliseconds: only the metadata is
read, tensor data is never touched. The format is documented in ggml's docs/gguf.md.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
#: Versions 2 and 3 share the layout (64-bit counts); version 1 (32-bit counts) is long obsolete.
SUPPORTED_VERSIONS = (2, 3)
#: Default tensor-data alignment when `general.alignment` is absent (gguf.md).
DEFAULT_ALIGNMENT = 32
#: ggml tensors have at most 4 dimensions.
MAX_DIMS = 4
#: Far beyond any real model; a larger count means the header is garbage, not a big model.
MAX_ENTRIES = 10_000_000
#: How a GGUF's `general.finetune` or `general.name` says "not instruction-tuned": converters copy the
#: Hugging Face repository's suffix there ("Qwen2.5-0.5B-Base", "deepseek-llm-7b-base", "...-pretrained").
_BASE_WORDS = re.compile(r"(?<![a-z0-9])(base|pretrain(ed)?)(?![a-z0-9])", re.IGNORECASE)
#: ... unless the same text also says it was tuned to follow instructions.
_TUNED_WORDS = re.compile(r"instruct|chat|(?<![a-z0-9])(it|sft|dpo|rlhf)(?![a-z0-9])", re.IGNORECASE)

# Metadata value types (gguf.md): type id -> struct format of one scalar (None: string / array).
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

#: ggml tensor type id -> (elements per block, bytes per block), as in gguf-py's GGML_QUANT_SIZES
#: (a test checks the two agree). An unknown type only skips that tensor's size check.
GGML_BLOCK_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 40),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    16: (256, 66),
    17: (256, 74),
    18: (256, 98),
    19: (256, 50),
    20: (32, 18),
    21: (256, 110),
    22: (256, 82),
    23: (256, 136),
    24: (1, 1),
    25: (1, 2),
    26: (1, 4),
    27: (1, 8),
    28: (1, 8),
    29: (256, 56),
    30: (1, 2),
    34: (256, 54),
    35: (256, 66),
    39: (32, 17),
    40: (64, 36),
    41: (128, 18),
}


class GGUFError(ValueError):
    """The file cannot be a loadable GGUF model; the message is one line naming the file."""


@dataclass(frozen=True)
class GGUFInfo:
    path: Path
    version: int
    file_size: int
    tensor_count: int
    architecture: str | None
    name: str | None  # general.name, for the pane's border
    context_length: int | None  # the context the model was trained for
    has_chat_template: bool
    parameter_count: int = 0  # elements of all tensors: what "a 135M model" means
    finetune: str | None = None  # general.finetune ("Instruct", "base", ...)
    says_base_model: bool = False  # its metadata names it a base (not instruction-tuned) model


class _Cursor:
    """Sequential little-endian reads over a buffer; running past its end means the file is truncated."""

    def __init__(self, buf: mmap.mmap | bytes, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def _need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated GGUF file (ends inside the {what} at byte {self.pos})")

    def unpack(self, fmt: str, what: str):
        size = struct.calcsize(fmt)
        self._need(size, what)
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self, what: str) -> bytes:
        n = self.unpack("<Q", what)
        self._need(n, what)
        value = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return value

    def skip(self, n: int, what: str) -> None:
        self._need(n, what)
        self.pos += n


def _read_value(cur: _Cursor, vtype: int, key: str):
    """Read one metadata value; arrays are skipped (returned as None) except for their length check."""
    what = f"metadata value of {key!r}"
    if vtype in _SCALAR_FORMATS:
        return cur.unpack(_SCALAR_FORMATS[vtype], what)
    if vtype == _STRING:
        return cur.string(what).decode("utf-8", "replace")
    if vtype == _ARRAY:
        etype = cur.unpack("<I", what)
        count = cur.unpack("<Q", what)
        if count > MAX_ENTRIES * 10:
            raise GGUFError(f"{cur.path}: corrupt GGUF metadata ({key!r} claims {count} elements)")
        if etype in _SCALAR_FORMATS:
            cur.skip(count * struct.calcsize(_SCALAR_FORMATS[etype]), what)
        elif etype == _STRING:
            # Vocabularies are arrays of ~50k strings; each length must be read to find the next.
            for _ in range(count):
                cur.skip(cur.unpack("<Q", what), what)
        else:
            raise GGUFError(f"{cur.path}: corrupt GGUF metadata ({key!r} has array element type {etype})")
        return None
    raise GGUFError(f"{cur.path}: corrupt GGUF metadata ({key!r} has value type {vtype})")


def check_gguf(path: str | Path) -> GGUFInfo:
    """Validate `path` as a complete GGUF model file; raise GGUFError with one clear line if it is not."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise GGUFError(f"{path}: model file not found") from None
    except OSError as exc:
        raise GGUFError(f"{path}: cannot read model file ({exc.strerror or exc})") from None
    if not path.is_file():
        raise GGUFError(f"{path}: not a file")
    if size < 24:  # magic + version + two counts
        raise GGUFError(f"{path}: not a GGUF file ({size} bytes, too short for a GGUF header)")
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _check(_Cursor(buf, path), size)
    except OSError as exc:
        raise GGUFError(f"{path}: cannot read model file ({exc.strerror or exc})") from None


def _check(cur: _Cursor, size: int) -> GGUFInfo:
    path = cur.path
    magic = bytes(cur.buf[:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (starts with {magic!r}, expected {GGUF_MAGIC!r})")
    cur.pos = 4
    version = cur.unpack("<I", "header")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(f"{path}: unsupported GGUF version {version} (supported: 2, 3)")
    n_tensors = cur.unpack("<Q", "header")
    n_kv = cur.unpack("<Q", "header")
    if n_tensors > MAX_ENTRIES or n_kv > MAX_ENTRIES:
        raise GGUFError(f"{path}: corrupt GGUF header ({n_tensors} tensors, {n_kv} metadata keys)")

    meta: dict[str, object] = {}
    for _ in range(n_kv):
        key = cur.string("metadata key").decode("utf-8", "replace")
        vtype = cur.unpack("<I", f"metadata type of {key!r}")
        meta[key] = _read_value(cur, vtype, key)

    alignment = meta.get("general.alignment") or DEFAULT_ALIGNMENT
    if not isinstance(alignment, int) or alignment <= 0:
        raise GGUFError(f"{path}: corrupt GGUF metadata (general.alignment = {alignment!r})")

    data_needed = 0  # bytes of tensor data the tensor table says follow the header
    parameters = 0
    for _ in range(n_tensors):
        name = cur.string("tensor table").decode("utf-8", "replace")
        n_dims = cur.unpack("<I", "tensor table")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(f"{path}: corrupt GGUF tensor table (tensor {name!r} has {n_dims} dimensions)")
        elements = 1
        for _ in range(n_dims):
            elements *= cur.unpack("<Q", "tensor table")
        parameters += elements
        ttype = cur.unpack("<I", "tensor table")
        offset = cur.unpack("<Q", "tensor table")
        block = GGML_BLOCK_SIZES.get(ttype)
        nbytes = (elements // block[0]) * block[1] if block else 0
        data_needed = max(data_needed, offset + nbytes)

    data_start = -(-cur.pos // alignment) * alignment
    if data_start + data_needed > size:
        raise GGUFError(
            f"{path}: truncated GGUF file ({size} bytes, its tensor table needs {data_start + data_needed})"
        )

    found = meta.get("general.architecture")
    arch = found if isinstance(found, str) else None
    general_name = meta.get("general.name")
    ctx = meta.get(f"{arch}.context_length") if arch else None
    said_finetune = meta.get("general.finetune")
    finetune = said_finetune if isinstance(said_finetune, str) and said_finetune else None
    model_name = general_name if isinstance(general_name, str) and general_name else None
    said = " ".join(t for t in (finetune, model_name) if t)
    return GGUFInfo(
        path=path,
        version=version,
        file_size=size,
        tensor_count=n_tensors,
        architecture=arch,
        name=model_name,
        context_length=int(ctx) if isinstance(ctx, int) else None,
        has_chat_template="tokenizer.chat_template" in meta,
        parameter_count=parameters,
        finetune=finetune,
        says_base_model=bool(_BASE_WORDS.search(said)) and not _TUNED_WORDS.search(said),
    )
