"""Untrusted text and numbers, written once: what reaches a terminal is cleaned, what goes to a file stays exact.

The hostile run here is written by tensorboardX: a tag that retitles the terminal, rings its bell, clears
the screen, returns the cursor and then reverses the text after it (an RTL override), in a run directory
whose name sets a colour and opens a bidi isolate. Every view (export to a terminal, the HTML and
Markdown reports, `watch`, the app) must show those characters as escapes; a file keeps them exactly.
"""

from __future__ import annotations

import csv
import io
import os
import select
import subprocess
import sys
import tty
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from tbtriage.analysis import prompt as prompt_mod
from tbtriage.analysis.detectors.base import fmt
from tbtriage.analysis.llm import strip_control
from tbtriage.analysis.render_markdown import num
from tbtriage.analysis.text import UNSAFE, clean, duration, number, one_line, step, step_span, strip, tick
from tbtriage.cli.main import main
from tbtriage.tui.app import make_app
from tbtriage.tui.widgets.tag_tree import TagTree
from tests._app_data import drive, fixed_clock

ROOT = Path(__file__).resolve().parent.parent

HOSTILE_TAG = "loss\x1b]0;pwned\x07\x1b[2J\r\u202egnp.exe"
HOSTILE_RUN = "run\x1b[31m\u2066x"
#: Characters that act on a terminal or reorder text instead of showing, as they appear in the names above.
RAW = ("\x1b", "\x07", "\r", "\u202e", "\u2066")


@pytest.fixture(scope="module")
def hostile_logdir(tmp_path_factory) -> Path:
    """One run by tensorboardX whose loss (named HOSTILE_TAG) goes NaN at step 60."""
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.summary_pb2 import Summary

    root = tmp_path_factory.mktemp("hostile")
    writer = SummaryWriter(str(root / HOSTILE_RUN))
    # `add_scalar` rewrites characters it dislikes in a tag; a file from another writer can hold any name,
    # so the summary goes to tensorboardX's file writer as built.
    file_writer = writer._get_file_writer()
    values = np.r_[np.linspace(2.0, 1.0, 60), np.full(20, np.nan)]
    for s, value in enumerate(values.tolist()):
        summary = Summary(value=[Summary.Value(tag=HOSTILE_TAG, simple_value=value)])
        file_writer.add_summary(summary, s, walltime=1.7e9 + s)
    writer.close()
    return root


def _assert_clean(text: str) -> None:
    assert not [c for c in RAW if c in text], f"raw {[c for c in RAW if c in text]!r} reached the output"
    assert "\\x1b]0;pwned\\x07" in text or "\\x1b[31m" in text  # shown, not obeyed


# ---- the rule ----------------------------------------------------------------------------------------------


def test_every_control_format_and_separator_character_of_unicode_is_unsafe():
    missed = [
        f"U+{c:04X}"
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and not UNSAFE.match(chr(c))
    ]
    assert missed == []


def test_people_see_escapes_the_prompt_sees_spaces_and_the_models_answer_loses_them():
    hostile = "a\x1b[2J\u202eb\tc\nd\U000e0041"
    assert clean(hostile) == "a\\x1b[2J\\u202eb\\x09c\\x0ad\\U000e0041"
    assert clean(hostile, keep_layout=True) == "a\\x1b[2J\\u202eb\tc\nd\\U000e0041"
    assert strip(hostile) == "a[2Jb\tc\nd"
    assert strip_control(hostile) == strip(hostile)
    assert one_line(hostile) == "a [2J b c d"
    assert one_line("x" * 50, 10) == "x" * 9 + "…"
    assert prompt_mod.clean_text(hostile, 10) == one_line(hostile, 10)
    assert clean("Ünïcödé 中文 🙂") == "Ünïcödé 中文 🙂"  # ordinary text passes untouched


def test_numbers_are_spelled_one_way_in_every_view():
    cases = {
        None: "—",
        float("nan"): "NaN",
        float("inf"): "+Inf",
        -float("inf"): "-Inf",
        True: "true",
        np.int64(3): "3",
        0.0: "0",
        1234567.0: "1234567",
        # Above 1e7 a float32 integer may be rounded (2**24 + 1 is stored as 2**24): significant digits.
        float(np.float32(123456789)): "1.235e+08",
        0.123456: "0.1235",
        1.5e-7: "1.5e-07",
    }
    for value, expected in cases.items():
        assert number(value) == expected
        assert num(value) == expected  # Markdown and HTML
        assert fmt(value) == expected  # detector messages
    # The prompt asks for fewer digits, with the same spelling and cut-offs.
    assert [prompt_mod.fmt_num(v) for v in (float("inf"), 0.123456, 1234567.0, 5e7)] == [
        "+Inf",
        "0.123",
        "1234567",
        "5e+07",
    ]


def test_steps_are_whole_and_a_span_uses_an_en_dash():
    assert [step(600), step(np.int64(600)), step(600.0), step(None)] == ["600", "600", "600", "—"]
    assert step_span(600, 900) == "600–900" and step_span(600, 600) == "600" and step_span(600) == "600"


def test_a_duration_is_written_in_the_unit_a_person_reads_it_in():
    # a stalled run in a logdir of old public runs was "silent for 2175576 min": years are years
    assert [duration(s) for s in (0, 40, 119.4, 1020, 7199, 5 * 3600, 47.9 * 3600)] == [
        "0 s",
        "40 s",
        "119 s",
        "17 min",
        "120 min",
        "5 h",
        "48 h",
    ]
    assert duration(3 * 86400) == "3 days" and duration(2175576 * 60) == "4.1 years"
    assert duration(-5) == "0 s"  # a clock running backwards is no negative age


# ---- issue 10 item 6: what goes to a terminal is cleaned, what goes to a file stays exact ------------------


def _export_on_a_terminal(logdir: Path) -> bytes:
    """`tbtriage export LOGDIR` with its stdout on a pseudo-terminal; the bytes the terminal received."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no newline translation: the bytes are exactly what the program wrote
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbtriage", "export", str(logdir)],
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=str(ROOT),
    )
    os.close(slave)
    received = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, "export wrote nothing for 60 s"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program closed the terminal
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    return received


def test_export_to_a_terminal_shows_escape_sequences_in_tag_names_instead_of_obeying_them(hostile_logdir):
    received = _export_on_a_terminal(hostile_logdir).decode("utf-8")
    _assert_clean(received.replace("\n", ""))
    rows = list(csv.DictReader(io.StringIO(received)))
    assert len(rows) == 80 and rows[0]["tag"] == clean(HOSTILE_TAG) and rows[0]["run"] == clean(HOSTILE_RUN)


def test_export_to_a_file_or_a_pipe_keeps_tag_names_exact(hostile_logdir, tmp_path, capsys):
    out = tmp_path / "points.csv"
    assert main(["export", str(hostile_logdir), "--out", str(out)]) == 0
    with open(out, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["run"], r["tag"]) for r in rows} == {(HOSTILE_RUN, HOSTILE_TAG)}

    piped = subprocess.run(
        [sys.executable, "-m", "tbtriage", "export", str(hostile_logdir)],
        capture_output=True,
        cwd=str(ROOT),
        timeout=60,
        check=True,
    )
    rows = list(csv.DictReader(io.StringIO(piped.stdout.decode("utf-8"), newline="")))
    assert rows[0]["tag"] == HOSTILE_TAG  # a script reading the pipe gets the data, not our escapes


@pytest.mark.parametrize("fmt_name", ["html", "md"])
def test_reports_on_stdout_show_hostile_names_without_obeying_them(hostile_logdir, capsys, fmt_name):
    assert main(["report", str(hostile_logdir), "--format", fmt_name]) == 0
    out = capsys.readouterr().out
    _assert_clean(out.replace("\n", ""))
    assert clean(HOSTILE_RUN) in out


def test_watch_lines_show_hostile_names_without_obeying_them(hostile_logdir, capsys):
    assert main(["watch", str(hostile_logdir), "--once"]) == 0
    out = capsys.readouterr().out
    assert "CRITICAL divergence" in out
    _assert_clean(out.replace("\n", ""))
    assert clean(HOSTILE_TAG) in out


def test_the_app_shows_a_right_to_left_override_as_an_escape(hostile_logdir):
    app = make_app(hostile_logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        leaves = [str(node.label) for node in app.screen.query_one(TagTree).root.children]
        assert any(label.startswith(clean(HOSTILE_TAG)) for label in leaves), leaves
        screen = app.export_screenshot()
        assert "\u202e" not in screen and "\u2066" not in screen and "\x1b" not in screen
        assert "\\u202egnp.exe" in screen

    drive(app, scenario)


def test_axis_ticks_are_short_with_k_m_g_suffixes():
    assert [tick(v) for v in (0, 250, 2000, 12500, 1_500_000, 999_999, -3000, 2e9)] == [
        "0", "250", "2k", "12.5k", "1.5M", "1M", "-3k", "2G",
    ]  # fmt: skip
    assert tick(0.1 + 0.2) == "0.3" and tick(float("nan")) == "NaN"
