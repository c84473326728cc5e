"""Line charts as inline SVG drawn on the server: no JavaScript, no charting library to vendor. Only numbers and
escaped labels go into the markup."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T, PAD_R = 640, 200, 56, 24, 12, 12


COLOURS = ("#1a73e8", "#e8710a", "#188038", "#d93025", "#9334e6", "#12b5cb")


def line_chart(points: list[tuple[float, float]], label: str) -> Markup:
    """points: (unix time, value), oldest first."""
    return chart([("", points)], label)


def chart(series: list[tuple[str, list[tuple[float, float]]]], label: str) -> Markup:
    """One line per (name, points); a legend when there is more than one."""
    everything = [pt for _, pts in series for pt in pts]
    if not everything:
        return Markup('<p class="muted">No samples yet: sampled every few seconds while the UI runs.</p>')
    points = series[0][1] if len(series) == 1 else sorted(everything)
    t0, t1 = min(t for t, _ in everything), max(t for t, _ in everything)
    vmax = max(v for _, v in everything) or 1.0
    span = (t1 - t0) or 1.0
    w, h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def xy(t: float, v: float) -> str:
        return f"{PAD_L + (t - t0) / span * w:.1f},{PAD_T + h - v / vmax * h:.1f}"

    lines = "".join(
        f'<polyline fill="none" class="series" style="stroke:{COLOURS[i % len(COLOURS)]}" '
        f'points="{" ".join(xy(t, v) for t, v in pts)}"/>'
        for i, (_, pts) in enumerate(series)
    )
    legend = "".join(
        f'<text x="{PAD_L + 8 + 110 * i}" y="{PAD_T + 10}" style="fill:{COLOURS[i % len(COLOURS)]}">'
        f"{escape(name)}</text>"
        for i, (name, _) in enumerate(series)
        if len(series) > 1
    )
    start = datetime.fromtimestamp(t0, UTC).strftime("%H:%M:%S")
    end = datetime.fromtimestamp(t1, UTC).strftime("%H:%M:%S")
    last = points[-1][1]
    return Markup(
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'data-last="{last:g}" data-max="{vmax:g}" data-points="{len(points)}">'
        f"<title>{escape(label)}</title>"
        f'<line x1="{PAD_L}" y1="{PAD_T + h}" x2="{PAD_L + w}" y2="{PAD_T + h}" class="axis"/>'
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{PAD_T + h}" class="axis"/>'
        f'<text x="{PAD_L - 6}" y="{PAD_T + 10}" text-anchor="end">{_short(vmax)}</text>'
        f'<text x="{PAD_L - 6}" y="{PAD_T + h}" text-anchor="end">0</text>'
        f'<text x="{PAD_L}" y="{HEIGHT - 6}">{start} UTC</text>'
        f'<text x="{PAD_L + w}" y="{HEIGHT - 6}" text-anchor="end">{end} UTC</text>'
        f"{lines}{legend}</svg>"
    )


def _short(v: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= size:
            return f"{v / size:.1f}{unit}"
    return f"{v:g}"
