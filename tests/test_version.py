"""One version, written in tbtriage/_version.py, which the package metadata takes at build: `tbtriage --version`,
`tbtriage.__version__` and every JSON output say it."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.cli.main import main
from tests._app_data import write_run
from tests._report_contract import assert_follows

ROOT = Path(__file__).resolve().parent.parent


def test_version_comes_from_the_installed_metadata(capsys):
    installed = version("tbtriage")
    written = re.search(r'^__version__ = "([^"]+)"', (ROOT / "tbtriage" / "_version.py").read_text(), re.M)
    assert written and installed == written.group(1)  # an install older than the source would differ
    assert tbtriage.__version__ == installed
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.split() == ["tbtriage", installed]


def test_the_report_says_which_version_wrote_it(tmp_path, capsys):
    write_run(tmp_path, "bs64", {"train/loss": np.linspace(2.0, 0.5, 50)})
    assert main(["report", str(tmp_path), "--format", "json"]) == 0
    assert assert_follows(json.loads(capsys.readouterr().out))["version"] == version("tbtriage")
    assert json.loads(tbtriage.diagnose(tmp_path).to_json())["version"] == version("tbtriage")
