"""tbtriage's themes: colours as data (one TOML file each) and the one stylesheet that uses them.

Each `<name>.toml` holds a Textual theme's base colours plus variables the app reads for
what CSS cannot reach: the run colours of charts (`chart-1`..`chart-N`, in slot order) and
the ends of the heatmap ramp. Widgets are styled only by `app.tcss` through theme
variables, so switching theme restyles everything, charts included.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when themes are loaded: `tbtriage --help` needs only the names
    from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

THEME_DIR = Path(__file__).resolve().parent
STYLESHEET = THEME_DIR / "app.tcss"

#: `t` cycles in this order; the first is the default.
THEME_ORDER = ("dark", "light", "high-contrast", "monochrome")
DEFAULT_THEME = THEME_ORDER[0]
#: Chosen when the NO_COLOR environment variable is set (https://no-color.org) and no theme was asked for.
NO_COLOR_THEME = "monochrome"

#: Okabe-Ito minus black: the fallback run colours for a theme that defines none.
FALLBACK_SERIES = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
FALLBACK_HEATMAP = ("#1F2A5A", "#F0E442")

_THEME_FIELDS = (
    "primary", "secondary", "accent", "warning", "error", "success",
    "foreground", "background", "surface", "panel", "boost",
    "dark", "luminosity_spread", "text_alpha",
)  # fmt: skip


@cache
def load_themes() -> dict[str, Theme]:
    """Every theme in THEME_ORDER, read from its TOML file."""
    from textual.theme import Theme

    themes = {}
    for name in THEME_ORDER:
        data = tomllib.loads((THEME_DIR / f"{name}.toml").read_text(encoding="utf-8"))
        fields = {key: data[key] for key in _THEME_FIELDS if key in data}
        themes[name] = Theme(name=name, variables=dict(data.get("variables", {})), **fields)
    return themes


def series_colours(variables: dict[str, str]) -> tuple[str, ...]:
    """The run colours a theme defines (`chart-1`, `chart-2`, ...), in slot order."""
    colours: list[str] = []
    while (colour := variables.get(f"chart-{len(colours) + 1}")) is not None:
        colours.append(colour)
    return tuple(colours) or FALLBACK_SERIES


def heatmap_ends(variables: dict[str, str]) -> tuple[str, str]:
    return variables.get("heatmap-low", FALLBACK_HEATMAP[0]), variables.get("heatmap-high", FALLBACK_HEATMAP[1])
