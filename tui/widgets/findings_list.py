"""The findings pane: one line per finding, worst first; `enter` jumps the chart to it."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tbtriage.analysis.datamodel import Finding
from tbtriage.analysis.findings import finding_key, finding_order
from tbtriage.analysis.health_index import finding_label
from tbtriage.tui.bindings import bindings
from tbtriage.tui.run_rows import ASCII_GLYPHS, GLYPHS, STATUS_COLOURS
from tbtriage.tui.safe_text import plain


def order_findings(findings: list[Finding]) -> list[Finding]:
    """Worst severity first, then earliest onset, then run name (`findings.finding_order`)."""
    return sorted(findings, key=finding_order)


class FindingsList(OptionList):
    BINDINGS = bindings("lists") + bindings("findings")

    class Jump(Message):
        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.findings: list[Finding] = []

    def show_findings(self, findings: list[Finding], *, with_run: bool, new: set[tuple], empty: str) -> None:
        """Replace the list; findings whose key is in `new` are highlighted (the caller shows them once)."""
        variables = self.app.theme_variables
        glyphs = ASCII_GLYPHS if self.ascii_only else GLYPHS
        highlighted = self.highlighted
        self.findings = order_findings(findings)
        self.clear_options()
        if not self.findings:
            self.add_option(Option(Text(empty, style="dim"), disabled=True))
            return
        options = []
        for index, finding in enumerate(self.findings):
            colour = variables.get(STATUS_COLOURS.get(finding.severity, "primary"), "")
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(glyphs.get(finding.severity, "?") + " ", style=colour)
            if finding_key(finding) in new:
                line.append("new ", style=f"bold reverse {colour}")
            if with_run:
                line.append(plain(finding.run) + " ", style="bold")
            line.append(finding_label(finding), style=colour)
            line.append("  " + plain(finding.message))
            options.append(Option(line, id=f"finding-{index}"))
        self.add_options(options)
        self.highlighted = min(highlighted or 0, len(self.findings) - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_jump()

    def action_jump(self) -> None:
        if self.highlighted is not None and self.highlighted < len(self.findings):
            self.post_message(self.Jump(self.findings[self.highlighted]))
