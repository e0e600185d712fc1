"""The built wheel, installed into a fresh venv, works beside a user's own `analysis.py` and `tui/` package.

Research repositories often have an `analysis` module of their own; tbtriage installs everything under the
`tbtriage` namespace so neither shadows the other. This builds the wheel from the source tree (no build
isolation, no index: nothing is downloaded), installs it into a new venv that borrows this environment's
dependencies, and runs it from such a user's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

from tests._app_data import write_run
from tests._report_contract import assert_follows

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from: the project file and the folders it maps into the namespace.
SOURCES = ["pyproject.toml", "README.md", "analysis", "tui", "themes", "tbtriage"]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the source tree (building in place would leave build/ in the repository)."""
    src = tmp / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    run([*pip, "-w", str(tmp / "dist"), str(src)], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("tbtriage-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new venv holding only the wheel; its dependencies come from this environment's site-packages."""
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        tmp,
    )
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).strip())
    # A plain path line, not a site dir: this environment's own .pth files (our editable install's finder
    # among them) are not run, so `tbtriage` can only come from the wheel.
    (site / "_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def users_project(tmp: Path) -> Path:
    """A research repo with its own `analysis.py` and `tui/` package, and a small logdir with a diverging run."""
    project = tmp / "my_research"
    (project / "tui").mkdir(parents=True)
    (project / "analysis.py").write_text('WHOSE = "the user\'s analysis"\n')
    (project / "tui" / "__init__.py").write_text('WHOSE = "the user\'s tui"\n')
    loss = np.linspace(3.0, 1.0, 60)
    loss[40:] = np.nan
    write_run(project / "runs", "lr_too_high", {"train/loss": loss})
    return project


def test_the_wheel_installs_and_runs_beside_a_users_own_analysis_and_tui(tmp_path):
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    # Only the namespace goes into site-packages: no top-level analysis/, tui/ or themes/ to collide with.
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"tbtriage"}
    assert "tbtriage/themes/app.tcss" in names  # package data travels too

    venv = fresh_venv(tmp_path, wheel)
    project = users_project(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(project)}  # the user's modules importable everywhere, as in a notebook
    env.pop("TBTRIAGE_KERNEL", None)
    tbtriage = str(venv / "bin" / "tbtriage")

    assert run([tbtriage, "--version"], project, env).split() == ["tbtriage", version("tbtriage")]

    probe = (
        "import analysis, tui, tbtriage, tbtriage.analysis.engine, tbtriage.tui.app; "
        "print(analysis.WHOSE); print(tui.WHOSE); print(tbtriage.__file__); print(tbtriage.analysis.engine.__file__)"
    )
    users_analysis, users_tui, ours, our_engine = run([str(venv / "bin" / "python"), "-c", probe], project, env).split(
        "\n"
    )[:4]
    assert (users_analysis, users_tui) == ("the user's analysis", "the user's tui")
    assert Path(ours).is_relative_to(venv) and Path(our_engine).is_relative_to(venv)

    report = json.loads(run([tbtriage, "report", "runs", "--format", "json"], project, env))
    assert_follows(report)
    assert report["version"] == version("tbtriage")
    (lr_run,) = report["runs"]
    assert lr_run["run"] == "lr_too_high" and any(f["kind"] == "divergence" for f in lr_run["findings"])
