"""tbtriage's headless core: reading, features, detectors, health, the model pipeline and the renderers.

Installed as `tbtriage.analysis`; the library API is `import tbtriage` (`tbtriage.load`, `tbtriage.diagnose`).
This package never imports Textual: it is usable from notebooks, cron jobs and CI.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`, read from the package metadata on first use (importlib.metadata is not free, and the
    app's first frame and `--help` never need it): `tbtriage --version`, the JSON report and the diagnosis agree."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("tbtriage")
    except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
