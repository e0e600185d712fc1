"""tbtriage's headless core: reading, features, detectors, health, the model pipeline and the renderers.

Installed as `tbtriage.analysis`; the library API is `import tbtriage` (`tbtriage.load`, `tbtriage.diagnose`).
This package never imports Textual: it is usable from notebooks, cron jobs and CI.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    #: One version, from the package metadata: `tbtriage --version`, the JSON report and the diagnosis agree.
    __version__ = version("tbtriage")
except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
    __version__ = "0+unknown"
