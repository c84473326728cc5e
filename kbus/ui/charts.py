"""Line charts as inline SVG drawn on the server: no JavaScript, no charting library to vendor. Only numbers and
escaped labels go into the markup."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T, PAD_R = 640, 200, 56, 24, 12, 12


def line_chart(points: list[tuple[float, float]], label: str) -> Markup:
    """points: (unix time, value), oldest first."""
    if not points:
        return Markup('<p class="muted">No samples yet: the lag is sampled every few seconds while the UI runs.</p>')
    t0, t1 = points[0][0], points[-1][0]
    vmax = max(v for _, v in points) or 1.0
    span = (t1 - t0) or 1.0
    w, h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def xy(t: float, v: float) -> str:
        return f"{PAD_L + (t - t0) / span * w:.1f},{PAD_T + h - v / vmax * h:.1f}"

    path = " ".join(xy(t, v) for t, v in points)
    start = datetime.fromtimestamp(t0, UTC).strftime("%H:%M:%S")
    end = datetime.fromtimestamp(t1, UTC).strftime("%H:%M:%S")
    last = points[-1][1]
    return Markup(
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'data-last="{last:g}" data-max="{vmax:g}" data-points="{len(points)}">'
        f"<title>{escape(label)}</title>"
        f'<line x1="{PAD_L}" y1="{PAD_T + h}" x2="{PAD_L + w}" y2="{PAD_T + h}" class="axis"/>'
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{PAD_T + h}" class="axis"/>'
        f'<text x="{PAD_L - 6}" y="{PAD_T + 10}" text-anchor="end">{vmax:g}</text>'
        f'<text x="{PAD_L - 6}" y="{PAD_T + h}" text-anchor="end">0</text>'
        f'<text x="{PAD_L}" y="{HEIGHT - 6}">{start} UTC</text>'
        f'<text x="{PAD_L + w}" y="{HEIGHT - 6}" text-anchor="end">{end} UTC</text>'
        f'<polyline fill="none" class="series" points="{path}"/>'
        "</svg>"
    )
