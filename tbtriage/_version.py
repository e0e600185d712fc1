"""tbtriage's version, the one place it is written: the package metadata takes it from here at build time
(`[tool.setuptools.dynamic]`), and the code reads it without `importlib.metadata` (~15-20 ms of imports and a
search of every installed distribution, on the way from the shell to the app's first frame)."""

__version__ = "0.1.0"
