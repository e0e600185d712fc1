"""How a run looks on every chart: a stable colour slot, and a line style once colours run out.

A run gets its slot the first time it is seen and keeps it for the session, so selecting a
third run never repaints the first two. Colours come from the theme (Okabe-Ito by default,
safe for the common colour-vision deficiencies); beyond the palette, the same colours come
back with a different marker, so 7 colours x 5 markers tell 35 runs apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.color import Color

from tbtriage.themes import series_colours

#: Line markers in plotext, one per pass through the palette. Braille first: the finest line.
MARKERS = ("braille", "dot", "+", "x", "o")
#: `--ascii` terminals get printable ASCII only.
ASCII_MARKERS = ("*", "+", "o", "x", "#")

#: How far a raw curve's colour is blended toward the background when a smoothed line is drawn
#: over it: faint enough to read as context, strong enough to still show every spike.
RAW_FADE = 0.6


@dataclass(frozen=True)
class SeriesStyle:
    colour: tuple[int, int, int]
    faint: tuple[int, int, int]
    marker: str
    swatch: str  # hex colour for legends and table swatches

    @property
    def sample(self) -> str:
        """Two cells that look like the line, for legends."""
        return _SAMPLES.get(self.marker, self.marker * 2)


_SAMPLES = {"braille": "━━", "dot": "••"}


def series_style(slot: int, variables: dict[str, str], ascii_only: bool) -> SeriesStyle:
    """The colour and marker of the run in colour slot `slot` under the current theme."""
    colours = series_colours(variables)
    distinct = len(dict.fromkeys(colours))  # a monochrome theme repeats one grey: styles must differ at once
    markers = ASCII_MARKERS if ascii_only else MARKERS
    colour = Color.parse(colours[slot % len(colours)])
    background = Color.parse(variables.get("surface", variables.get("background", "#000000")))
    return SeriesStyle(
        colour=colour.rgb,
        faint=colour.blend(background, RAW_FADE).rgb,
        marker=markers[(slot // distinct) % len(markers)],
        swatch=colour.hex,
    )


class SlotBook:
    """Hands out colour slots in order of first sight and never takes one back."""

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}

    def slot(self, run: str) -> int:
        return self._slots.setdefault(run, len(self._slots))
