"""tbtriage claims Python 3.10: no module may use a newer API or syntax without a `sys.version_info` guard.

vermin reads every module's imports, members and syntax and knows the version each appeared in; a guarded
import (`if sys.version_info >= (3, 11): import tomllib`) counts as satisfied. `.ci/run` runs the same check.
vermin treats a module guarded once in a file as guarded in all of that file; mypy (`python_version = "3.10"`,
run by `.ci/typecheck`) catches a second, unguarded import there.
"""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "vermin.ini"
SOURCES = ["analysis", "tui", "themes", "tbtriage"]


def vermin(*paths: str | Path) -> subprocess.CompletedProcess[str]:
    """vermin with the project's settings: exit status 1 when a file needs more than the floor."""
    # vermin has no `python -m vermin`; this is what its console script runs.
    command = [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "--config-file", str(CONFIG)]
    return subprocess.run(command + [str(p) for p in paths], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_checked_floor_is_the_one_pyproject_claims():
    claimed = re.search(r'^requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    config = configparser.ConfigParser()
    config.read(CONFIG)
    assert claimed and config["vermin"]["targets"] == f"{claimed.group(1)}-"


def test_every_module_runs_on_the_claimed_floor():
    result = vermin(*SOURCES)
    assert result.returncode == 0, f"modules need a newer Python than pyproject claims:\n{result.stdout}{result.stderr}"


def test_the_check_catches_an_unguarded_tomllib_import(tmp_path):
    """The very bug this check exists for: themes/ once imported tomllib with no 3.10 fallback."""
    (tmp_path / "unguarded.py").write_text("import tomllib\n")
    (tmp_path / "guarded.py").write_text(
        "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import tomli as tomllib\n"
    )
    caught = vermin(tmp_path / "unguarded.py")
    assert caught.returncode != 0
    assert "'tomllib' module requires" in caught.stdout
    assert vermin(tmp_path / "guarded.py").returncode == 0
