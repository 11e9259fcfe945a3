"""``elo.svg``: Elo against tokens per task, one series per compute family, intervals as whiskers."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

from ..analysis.elo import EloResult
from ..analysis.elo_report import EloReport, finite
from .elo import ci_text, elo_text, tokens_text
from .format import unsign_zero

__all__ = ["render_elo_svg", "render_no_elo_svg"]


# --------------------------------------------------------------------------------------------------
# elo.svg

_W, _H = 760, 480
_X0, _X1, _Y0, _Y1 = 72.0, 548.0, 52.0, 412.0  # plot area: left, right, top, bottom
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_PLAIN = "#555555"


def _esc(text: str) -> str:
    return escape(text, {'"': "&quot;"})


def _f(x: float) -> str:
    return unsign_zero(f"{x:.1f}")


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / target
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw:
            return m * mag
    return 10.0 * mag


def _linear_ticks(lo: float, hi: float) -> list[float]:
    step = _nice_step(hi - lo)
    start = math.ceil(lo / step - 1e-9)
    ticks = []
    i = start
    while i * step <= hi + 1e-9 * step:
        ticks.append(i * step)
        i += 1
    return ticks


def _tick_text(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return unsign_zero(f"{v:.{decimals}f}")


def _tok_text(v: float) -> str:
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks for a log axis over [lo, hi] (values): 1-2-5 per decade, decades only when dense, or linear
    ticks for a narrow range."""
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    cands = [m * 10.0**d for d in range(d0, d1 + 1) for m in (1.0, 2.0, 5.0)]
    ticks = [v for v in cands if lo <= v <= hi]
    if len(ticks) > 8:
        ticks = [v for v in ticks if math.log10(v).is_integer()]
    if len(ticks) < 2:
        ticks = [v for v in _linear_ticks(lo, hi) if v > 0]
    return ticks


@dataclass(frozen=True)
class _Plot:
    """The plotted agents' data and the value ranges of both axes, with their mapping to pixels."""

    result: EloResult
    tokens: dict[str, float]
    x_lo: float  # log10 tokens
    x_hi: float
    y_lo: float  # Elo
    y_hi: float

    def px(self, tok: float) -> float:
        return _X0 + (math.log10(tok) - self.x_lo) / (self.x_hi - self.x_lo) * (_X1 - _X0)

    def py(self, elo: float) -> float:
        return _Y1 - (elo - self.y_lo) / (self.y_hi - self.y_lo) * (_Y1 - _Y0)

    def elo_bounds(self, a: str) -> tuple[float, float]:
        """The agent's interval, or its point twice when the interval is not finite."""
        res = self.result
        lo, hi = res.low[a], res.high[a]
        return (lo, hi) if finite(lo) and finite(hi) else (res.elo[a], res.elo[a])


def _plot(res: EloResult, tokens: dict[str, float], shown: list[str]) -> _Plot:
    """Axis ranges covering every shown agent's tokens and interval, padded, at least 2x and 20 Elo wide."""
    lx = [math.log10(tokens[a]) for a in shown]
    x_lo, x_hi = min(lx), max(lx)
    if x_hi - x_lo < math.log10(2.0):
        mid = (x_lo + x_hi) / 2
        x_lo, x_hi = mid - math.log10(2.0) / 2, mid + math.log10(2.0) / 2
    pad = 0.06 * (x_hi - x_lo)
    partial = _Plot(res, tokens, x_lo - pad, x_hi + pad, 0.0, 1.0)
    ys = [v for a in shown for v in (*partial.elo_bounds(a), res.elo[a])]
    y_lo, y_hi = min(ys), max(ys)
    if y_hi - y_lo < 20.0:
        mid = (y_lo + y_hi) / 2
        y_lo, y_hi = mid - 10.0, mid + 10.0
    pad = 0.08 * (y_hi - y_lo)
    return dataclasses.replace(partial, y_lo=y_lo - pad, y_hi=y_hi + pad)


def _axes(plot: _Plot) -> list[str]:
    """Grid lines, the plot frame, tick labels and both axis titles."""
    px, py = plot.px, plot.py
    out = ['<g class="axes" stroke="#e5e5e5">']
    y_ticks = _linear_ticks(plot.y_lo, plot.y_hi)
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    for v in y_ticks:
        out.append(f'<line x1="{_f(_X0)}" y1="{_f(py(v))}" x2="{_f(_X1)}" y2="{_f(py(v))}"/>')
    x_ticks = _log_ticks(10.0**plot.x_lo, 10.0**plot.x_hi)
    for v in x_ticks:
        out.append(f'<line x1="{_f(px(v))}" y1="{_f(_Y0)}" x2="{_f(px(v))}" y2="{_f(_Y1)}"/>')
    out.append("</g>")
    out.append(
        f'<rect x="{_f(_X0)}" y="{_f(_Y0)}" width="{_f(_X1 - _X0)}" height="{_f(_Y1 - _Y0)}" '
        'fill="none" stroke="#333333"/>'
    )
    for v in y_ticks:
        out.append(
            f'<text x="{_f(_X0 - 6)}" y="{_f(py(v) + 4)}" text-anchor="end">{_tick_text(v, y_step)}</text>'
        )
    for v in x_ticks:
        out.append(f'<text x="{_f(px(v))}" y="{_f(_Y1 + 18)}" text-anchor="middle">{_tok_text(v)}</text>')
    out.append(
        f'<text x="{_f((_X0 + _X1) / 2)}" y="{_f(_Y1 + 40)}" text-anchor="middle">'
        "tokens per task, all roles (log scale)</text>"
    )
    out.append(
        f'<text x="18.0" y="{_f((_Y0 + _Y1) / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 18.0 {_f((_Y0 + _Y1) / 2)})">Elo (95% bootstrap interval)</text>'
    )
    return out


def _point(plot: _Plot, a: str, color: str, label: str) -> list[str]:
    """One agent: its interval as a whisker, its point with a tooltip, and its label."""
    res, tokens = plot.result, plot.tokens
    x, y = plot.px(tokens[a]), plot.py(res.elo[a])
    lo, hi = (plot.py(v) for v in plot.elo_bounds(a))
    interval = ci_text(res.low[a], res.high[a])
    tip = f"{a}: Elo {elo_text(res.elo[a])} {interval}, {tokens_text(tokens[a])} tokens/task"
    return [
        f'<line class="ci" x1="{_f(x)}" y1="{_f(lo)}" x2="{_f(x)}" y2="{_f(hi)}" stroke="{color}"/>',
        f'<line x1="{_f(x - 4)}" y1="{_f(lo)}" x2="{_f(x + 4)}" y2="{_f(lo)}" stroke="{color}"/>',
        f'<line x1="{_f(x - 4)}" y1="{_f(hi)}" x2="{_f(x + 4)}" y2="{_f(hi)}" stroke="{color}"/>',
        f'<circle cx="{_f(x)}" cy="{_f(y)}" r="4" fill="{color}"><title>{_esc(tip)}</title></circle>',
        f'<text x="{_f(x + 7)}" y="{_f(y - 6)}" fill="{color}" font-size="11">{_esc(label)}</text>',
    ]


def _series(plot: _Plot, report: EloReport, plain: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """One line per compute family joining its tiers, then the other agents as grey points; with the
    legend entries (colour, text) in drawing order."""
    out: list[str] = []
    legend: list[tuple[str, str]] = []
    tokens, res = plot.tokens, plot.result
    for i, (family, tiers) in enumerate(report.families.items()):
        color = _PALETTE[i % len(_PALETTE)]
        pts = [(t, a) for t, a in tiers if a in tokens]
        d = " ".join(
            f"{'M' if j == 0 else 'L'} {_f(plot.px(tokens[a]))} {_f(plot.py(res.elo[a]))}"
            for j, (_t, a) in enumerate(pts)
        )
        out.append(f'<g class="family" data-family="{_esc(family)}">')
        if pts:
            out.append(
                f'<path class="series" data-family="{_esc(family)}" d="{d}" fill="none" stroke="{color}" '
                'stroke-width="2"/>'
            )
        for t, a in pts:
            out += _point(plot, a, color, t)
        out.append("</g>")
        legend.append((color, f"{family}: {' → '.join(t for t, _a in tiers)}"))
    plain_shown = [a for a in plain if a in tokens]
    if plain_shown:
        out.append('<g class="agents">')
        for a in plain_shown:
            out += _point(plot, a, _PLAIN, a)
        out.append("</g>")
        legend.append((_PLAIN, "other agents"))
    return out, legend


def _legend(legend: list[tuple[str, str]], hidden: list[str]) -> list[str]:
    """A colour swatch and text per entry right of the plot, then the agents without token data."""
    out = []
    ly = _Y0 + 8
    for color, text in legend:
        out.append(f'<rect x="{_f(_X1 + 20)}" y="{_f(ly - 9)}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{_f(_X1 + 38)}" y="{_f(ly + 1)}">{_esc(text)}</text>')
        ly += 20
    if hidden:
        out.append(
            f'<text x="{_f(_X1 + 20)}" y="{_f(ly + 1)}" fill="#888888">not shown (no token data): '
            f"{_esc(', '.join(hidden))}</text>"
        )
    return out


def render_elo_svg(report: EloReport) -> str:
    """``elo.svg``: Elo (y) against tokens per task, all roles (x, log scale), with 95% interval bars; one
    line per compute family joining its tiers in order, other agents as grey points. Self-contained and
    deterministic (fixed number formatting)."""
    res = report.result
    tokens = {a: s.tokens_per_task for a, s in report.tokens.items() if s.tokens_per_task > 0}
    in_family = {a for tiers in report.families.values() for _t, a in tiers}
    plain = [a for a in sorted(res.agents) if a not in in_family]
    shown = [a for a in res.agents if a in tokens]
    hidden = sorted(a for a in res.agents if a not in tokens)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
    ]
    title = "Elo vs tokens per task" + (f": {report.suite}" if report.suite else "")
    out.append(f'<text x="{_W / 2:.1f}" y="28.0" text-anchor="middle" font-size="16">{_esc(title)}</text>')
    if not shown:
        out.append(
            f'<text x="{(_X0 + _X1) / 2:.1f}" y="{(_Y0 + _Y1) / 2:.1f}" text-anchor="middle">'
            "no token data: nothing to plot</text>"
        )
    else:
        plot = _plot(res, tokens, shown)
        series, legend = _series(plot, report, plain)
        out += _axes(plot) + series + _legend(legend, hidden)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render_no_elo_svg(suite: str, reason: str) -> str:
    """``elo.svg`` when no scale could be fitted: the title and the reason, nothing plotted."""
    return (
        "\n".join(
            [
                f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
                'font-family="sans-serif" font-size="12">',
                f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
                f'<text x="{_W / 2:.1f}" y="28.0" text-anchor="middle" font-size="16">'
                f"{_esc('Elo vs tokens per task: ' + suite)}</text>",
                f'<text x="{_W / 2:.1f}" y="{_H / 2:.1f}" text-anchor="middle">'
                f"{_esc('No Elo scale could be fitted: ' + reason.split(':')[0])}</text>",
                "</svg>",
            ]
        )
        + "\n"
    )
