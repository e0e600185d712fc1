"""The one table of key bindings.

The footer, the `?` help screen, the command palette and user remapping (config `[keys]`,
action id -> key) are all generated from `KEY_ACTIONS`, so a key shown anywhere is the key
that works, and a remapped key shows up everywhere at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

#: Which widget or screen holds an action's binding. "app" bindings are the app's own (they work
#: on the screens in the action's `screens`); "lists" is every list pane (runs, tags, findings);
#: the others are one pane or screen each.
SCOPES = ("app", "lists", "runs", "findings", "chart", "filter", "dashboard", "compare", "distributions")

SCOPE_TITLES = {
    "app": "App (every screen unless noted)",
    "lists": "Lists (runs, tags, findings)",
    "runs": "Runs pane",
    "findings": "Findings pane",
    "chart": "Chart",
    "filter": "Filter box",
    "dashboard": "Run dashboard",
    "compare": "Compare screen",
    "distributions": "Distributions and gradient flow",
}

#: The screens an "app" action can work on (each screen class names itself in `SCREEN`). The help
#: screen is modal over the others: keys that change the chart or theme still reach what is below it.
SCREENS = ("main", "dashboard", "help", "compare", "distributions")
EVERYWHERE = frozenset(SCREENS)
#: Actions on the main screen's chart, lists, filter boxes or diagnosis pane: nowhere else to act on.
MAIN_ONLY = frozenset({"main"})
#: Screens made of panes (not the modal help).
WITH_PANES = frozenset({"main", "dashboard", "compare"})
#: The chart options (smoothing, log-y, x axis, outliers) act on the scalar charts of these screens.
SCALAR_CHARTS = frozenset({"main", "dashboard", "help", "compare"})
#: Where a run is chosen (the cursor's run, or the dashboard's) for a view of that run to open.
RUN_VIEWS = frozenset({"main", "dashboard"})


@dataclass(frozen=True)
class KeyAction:
    """One thing the user can do, and the key that does it by default."""

    id: str  # stable name used in config `[keys]`; also the Textual binding id
    key: str  # default key(s), Textual key names, comma separated
    action: str  # the Textual action it runs
    label: str  # short footer label
    help: str  # one sentence for the help screen and the command palette
    scope: str
    footer: bool = True  # shown in the footer (the rest are in `?` help and the palette)
    palette: bool = True  # offered in the command palette
    priority: bool = False  # wins over a focused widget's own binding of the same key
    screens: frozenset[str] = EVERYWHERE  # where it works: enabled there, offered there by the palette

    @property
    def name(self) -> str:
        """The action's method name without arguments: `zoom(0.5)` -> `zoom`."""
        return self.action.split("(", 1)[0]


KEY_ACTIONS: tuple[KeyAction, ...] = (
    KeyAction("help", "question_mark", "help", "Help", "Show every key and what it does", "app"),
    KeyAction(
        "filter", "slash", "filter", "Filter", "Filter the runs by name or value (or the tags, when they have focus, by regex)", "app",
        screens=MAIN_ONLY,
    ),
    KeyAction(
        "smoothing", "s", "cycle_smoothing", "Smooth", "Cycle the chart's EMA smoothing weight", "app",
        screens=SCALAR_CHARTS,
    ),
    KeyAction("log_y", "l", "toggle_log_y", "Log-y", "Toggle a logarithmic y axis", "app", screens=SCALAR_CHARTS),
    KeyAction(
        "x_axis", "x", "cycle_x_axis", "X-axis", "Cycle the x axis: step, relative time, wall time", "app",
        screens=SCALAR_CHARTS,
    ),
    KeyAction(
        "outliers", "o", "toggle_outliers", "Outliers", "Toggle an outlier-ignoring y range (5th-95th percentile)",
        "app", screens=SCALAR_CHARTS,
    ),
    KeyAction(
        "histograms", "h", "open_histograms", "Histograms",
        "Distributions of the histograms over steps, and the gradient flow by layer", "app",
        screens=RUN_VIEWS,
    ),
    KeyAction(
        "export", "e", "export_csv", "Export",
        "Export the charted series (raw and smoothed) to CSV in the current directory", "app", screens=MAIN_ONLY,
    ),
    KeyAction("follow", "f", "toggle_follow", "Follow", "Toggle live follow of appended events", "app"),
    KeyAction(
        "diagnose", "d", "diagnose", "Diagnose", "Diagnose run with the local model", "app", footer=False,
        screens=MAIN_ONLY,
    ),
    KeyAction(
        "all_findings", "a", "toggle_all_findings", "All findings",
        "Show findings of every run, or of the selected run only", "app", footer=False, screens=MAIN_ONLY,
    ),
    KeyAction(
        "copy_report", "c", "copy_report", "Copy", "Copy the run's report (Markdown) to the clipboard", "app",
        footer=False,
    ),
    KeyAction(
        "compare", "C", "compare", "Compare",
        "Compare the selected runs side by side: differing settings, metrics, where the curves part, why",
        "app", footer=False, screens=MAIN_ONLY,
    ),
    KeyAction(
        "maximize", "z", "toggle_maximize", "Maximise", "Maximise the focused pane to the whole screen, or restore it",
        "app", footer=False, screens=WITH_PANES,
    ),
    KeyAction("refresh", "r", "refresh", "Reload", "Read newly appended events now", "app", footer=False),
    KeyAction("theme", "t", "cycle_theme", "Theme", "Cycle the colour theme", "app", footer=False),
    KeyAction(
        "zoom_in", "plus,equals_sign", "zoom(0.5)", "Zoom in", "Zoom the chart in around its centre", "app",
        footer=False, screens=MAIN_ONLY,
    ),
    KeyAction(
        "zoom_out", "minus", "zoom(2.0)", "Zoom out", "Zoom the chart out", "app", footer=False, screens=MAIN_ONLY
    ),
    KeyAction(
        "pan_left", "left_square_bracket", "pan(-0.25)", "Pan left", "Pan the chart left", "app", footer=False,
        screens=MAIN_ONLY,
    ),
    KeyAction(
        "pan_right", "right_square_bracket", "pan(0.25)", "Pan right", "Pan the chart right", "app", footer=False,
        screens=MAIN_ONLY,
    ),
    KeyAction(
        "reset_view", "0", "reset_view", "Reset view", "Show the whole x range again", "app", footer=False,
        screens=MAIN_ONLY,
    ),
    KeyAction("quit", "q", "quit", "Quit", "Quit tbtriage", "app"),
    KeyAction("cursor_down", "j", "cursor_down", "Down", "Move down", "lists", footer=False, palette=False),
    KeyAction("cursor_up", "k", "cursor_up", "Up", "Move up", "lists", footer=False, palette=False),
    KeyAction("first", "g", "first", "Top", "Go to the first row", "lists", footer=False, palette=False),
    KeyAction("last", "G", "last", "Bottom", "Go to the last row", "lists", footer=False, palette=False),
    KeyAction(
        "select_run", "space", "toggle_select", "Select", "Select the run to overlay it on the chart (and compare it: C)", "runs",
        palette=False,
    ),
    KeyAction("open_run", "enter", "open_dashboard", "Dashboard", "Open the run's dashboard", "runs", palette=False),
    KeyAction(
        "sort", "S", "cycle_sort", "Sort", "Cycle the sort: health, name, last step, liveness", "runs", palette=False
    ),
    KeyAction(
        "jump", "enter", "jump", "Jump", "Chart the finding's run and tag around its step", "findings", palette=False
    ),
    KeyAction(
        "close_filter", "escape", "close_filter", "Clear", "Clear the filter and close it", "filter", palette=False
    ),
    KeyAction("close_dashboard", "escape", "close", "Back", "Back to the main screen", "dashboard", palette=False),
    KeyAction("close_compare", "escape", "close", "Back", "Back to the main screen", "compare", palette=False),
    KeyAction(
        "prev_step", "left_square_bracket", "step(-1)", "Step -", "Show the previous logged step", "distributions",
        palette=False,
    ),
    KeyAction(
        "next_step", "right_square_bracket", "step(1)", "Step +", "Show the next logged step", "distributions",
        palette=False,
    ),
    KeyAction(
        "toggle_flow", "v", "toggle_flow", "Grad flow", "Switch between the distributions and the gradient flow",
        "distributions", palette=False,
    ),
    KeyAction(
        "close_distributions", "escape", "close", "Back", "Back to the screen before", "distributions",
        palette=False,
    ),
)  # fmt: skip

BY_ID = {action.id: action for action in KEY_ACTIONS}


def works_on(action_name: str, screen: str | None) -> bool:
    """Whether the app-level action `action_name` (`zoom`, `toggle_log_y`) applies on `screen`.

    Actions outside the table (Textual's own) apply everywhere.
    """
    where = [a.screens for a in KEY_ACTIONS if a.scope == "app" and a.name == action_name]
    return not where or any(screen in screens for screens in where)


def palette_actions(screen: str | None) -> list[KeyAction]:
    """The actions the command palette offers on `screen`: exactly those that work there."""
    return [a for a in KEY_ACTIONS if a.palette and screen in a.screens]


#: The command palette's own key, remappable like the rest under this id.
PALETTE_ID, PALETTE_KEY = "command_palette", "ctrl+p"


def bindings(scope: str) -> list[BindingType]:  # the type Textual declares for BINDINGS
    """Textual bindings for one scope, each with its table id so a keymap can remap it."""
    return [
        Binding(a.key, a.action, a.label, show=a.footer, id=a.id, tooltip=a.help, priority=a.priority)
        for a in KEY_ACTIONS
        if a.scope == scope
    ]


def keymap_from_config(keys: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Split a config `[keys]` table into a Textual keymap and the names it does not know."""
    known = set(BY_ID) | {PALETTE_ID}
    keymap = {name: str(key) for name, key in keys.items() if name in known}
    return keymap, sorted(set(keys) - known)


#: Textual key names -> what is printed on the keycap (plain ASCII, so `--ascii` can use it too).
_KEY_CAPTIONS = {
    "question_mark": "?", "slash": "/", "plus": "+", "equals_sign": "=", "minus": "-",
    "left_square_bracket": "[", "right_square_bracket": "]", "escape": "esc",
}  # fmt: skip


def key_caption(keys: str) -> str:
    """`plus,equals_sign` -> `+ =`; `ctrl+p` -> `^p`."""
    captions = []
    for key in keys.split(","):
        key = key.strip()
        captions.append("^" + key[5:] if key.startswith("ctrl+") else _KEY_CAPTIONS.get(key, key))
    return " ".join(captions)


def effective_key(action: KeyAction, keymap: dict[str, str]) -> str:
    """The key(s) that trigger `action` once the user's remapping is applied."""
    return keymap.get(action.id, action.key)
