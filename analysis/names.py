"""File and directory names as the reader and the run listing see them: which files hold events, names as text.

Kept apart from the reader (which brings the decoding kernel and tensorboard's protobufs with it), so listing a
logdir's runs (`discover.find_runs`) costs no import a warm reopen's first screen does not need.
"""

from __future__ import annotations


def is_event_file(name: str) -> bool:
    """TensorBoard's rule: any file whose name contains 'tfevents'."""
    return "tfevents" in name


def escape_name(name: str) -> str:
    """A file or directory name as text: bytes that are not UTF-8 (which Python carries as lone
    surrogates, unprintable and unencodable) become `\\xNN`, so two names differing only in those
    bytes stay two names, and every output (file, terminal, JSON) can write it."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def decode_name(raw: bytes) -> tuple[str, bool]:
    """Tag bytes as text, and whether they were not valid UTF-8 (then escaped as `\\xNN`, see escape_name)."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace"), True
