"""tbtriage's headless core: reading, features, detectors, health, the model pipeline and the renderers.

Installed as `tbtriage.analysis`; the library API is `import tbtriage` (`tbtriage.load`, `tbtriage.diagnose`).
This package never imports Textual: it is usable from notebooks, cron jobs and CI.
"""

from __future__ import annotations

# Written once, in tbtriage/_version.py (the package metadata takes it from there): reading it back through
# importlib.metadata cost the app's first frame ~15-20 ms. `tbtriage --version`, the JSON report, the caches' headers
# and the diagnosis all read this.
from tbtriage._version import __version__

__all__ = ["__version__"]
