"""tbtriage claims Python 3.10: no module may use a newer API without a `sys.version_info` guard.

vermin reads every module's imports, members and syntax and knows the version each appeared in; a guarded
import (`if sys.version_info >= (3, 11): import tomllib`) counts as satisfied. `.ci/run` runs the same check.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The floor `requires-python` states in pyproject.toml.
FLOOR = "3.10"
SOURCES = ["analysis", "tui", "themes", "tbtriage"]


def vermin(*paths: str | Path) -> subprocess.CompletedProcess[str]:
    """vermin as CI runs it: fail when any file needs more than FLOOR."""
    return subprocess.run(
        # vermin has no `python -m vermin`; this is what its console script runs.
        [
            sys.executable,
            "-c",
            "import sys, vermin; sys.exit(vermin.main())",
            "-q",
            f"-t={FLOOR}-",
            "--violations",
            "--no-tips",
            "--eval-annotations",
        ]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_every_module_runs_on_the_claimed_floor():
    result = vermin(*SOURCES)
    assert result.returncode == 0, f"modules need more than Python {FLOOR}:\n{result.stdout}{result.stderr}"


def test_the_check_catches_an_unguarded_tomllib_import(tmp_path):
    """The very bug this check exists for: themes/ once imported tomllib with no 3.10 fallback."""
    (tmp_path / "unguarded.py").write_text("import tomllib\n")
    (tmp_path / "guarded.py").write_text(
        "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import tomli as tomllib\n"
    )
    caught = vermin(tmp_path / "unguarded.py")
    assert caught.returncode != 0
    assert "tomllib" in caught.stdout
    assert vermin(tmp_path / "guarded.py").returncode == 0
