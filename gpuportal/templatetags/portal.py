"""Small template helpers: inline SVG sparklines (no chart library needed for a 30-point trend)."""

from django import template
from django.utils.html import format_html

from gpuportal.text.formatting import duration_text, figure_text, relative_time

register = template.Library()


@register.simple_tag
def sparkline(values, maximum=100, width=120, height=24, label=""):
    """An inline SVG polyline of ``values`` (None gaps skipped) scaled to ``maximum``; empty text if no data."""
    points = [v for v in (values or []) if v is not None]
    if len(points) < 2:
        return format_html('<span class="muted">{}</span>', "—" if not points else points[-1])
    top = max(float(maximum or 0), max(points), 1e-9)
    step = width / (len(points) - 1)
    coords = " ".join(f"{i * step:.1f},{height - (v / top) * (height - 2) - 1:.1f}" for i, v in enumerate(points))
    return format_html(
        '<svg class="spark" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{}"/></svg>',
        width, height, width, height, label, coords)


@register.filter
def megabytes(value):
    """MiB as a short human figure (GiB above 1024)."""
    if not isinstance(value, (int, float)):
        return "—"
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value} MiB"


@register.filter
def rate(value):
    """Bytes per second, humanised."""
    if not isinstance(value, (int, float)):
        return "—"
    for unit in ("B/s", "kB/s", "MB/s", "GB/s"):
        if value < 1000:
            return f"{value:.0f} {unit}"
        value /= 1000
    return f"{value:.1f} TB/s"


@register.simple_tag
def job_status(job):
    """A job's status as a badge (a tag, not an include: it is drawn on every row of the job lists)."""
    return format_html('<span class="status status-{}">{}</span>', job.status, job.get_status_display())


@register.filter
def relative(moment):
    """A moment as "in 2 h 5 min" / "12 min ago" (gpuportal.text.formatting)."""
    return relative_time(moment)


@register.filter
def duration(seconds):
    """Seconds as "6 h 0 min" (gpuportal.text.formatting)."""
    return duration_text(seconds) if isinstance(seconds, int | float) else "—"


@register.filter
def figure(value):
    """A figure with its thousands grouped ("12,345.6"), a dash for none (gpuportal.text.formatting)."""
    return figure_text(value)
