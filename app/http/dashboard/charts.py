"""Server-rendered SVG charts: no script, no inline style (the CSP forbids both; colours come
from the dashboard's stylesheet through classes), every label escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

_ROW = 22
_LABEL_WIDTH = 170
_BAR_WIDTH = 260
_VALUE_WIDTH = 60
#: labels longer than this are cut (the full text stays in the bar's tooltip)
_LABEL_CHARS = 26


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its label, value and where it links (a local URL built by the page)."""

    label: str
    value: int
    href: str | None = None


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"


def bar_chart(bars: Sequence[Bar], *, title: str, empty: str = "nothing to show") -> Markup:
    """A horizontal bar chart of ``bars`` as inline SVG markup."""
    if not bars:
        return Markup('<p class="empty">{}</p>').format(empty)
    top = max(bar.value for bar in bars) or 1
    width = _LABEL_WIDTH + _BAR_WIDTH + _VALUE_WIDTH
    height = _ROW * len(bars) + 4
    parts = [
        Markup(
            '<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" '
            'viewBox="0 0 {w} {h}" width="{w}" height="{h}" aria-label="{t}"><title>{t}</title>'
        ).format(w=width, h=height, t=title)
    ]
    for row, bar in enumerate(bars):
        y = 2 + row * _ROW
        length = max(1, round(_BAR_WIDTH * bar.value / top)) if bar.value else 0
        text_y = y + _ROW // 2 + 4
        item = Markup(
            '<g class="bar-row"><title>{label}: {value}</title>'
            '<text class="bar-label" x="{lx}" y="{ty}" text-anchor="end">{short}</text>'
            '<rect class="bar" x="{bx}" y="{by}" width="{bw}" height="{bh}"></rect>'
            '<text class="bar-value" x="{vx}" y="{ty}">{value}</text></g>'
        ).format(
            label=bar.label,
            short=_short(bar.label),
            value=bar.value,
            lx=_LABEL_WIDTH - 6,
            ty=text_y,
            bx=_LABEL_WIDTH,
            by=y + 3,
            bw=length,
            bh=_ROW - 6,
            vx=_LABEL_WIDTH + length + 4,
        )
        if bar.href is not None:
            item = Markup('<a href="{}">{}</a>').format(bar.href, item)
        parts.append(item)
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)
