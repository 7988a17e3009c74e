"""``gpuportal efficiency JOB`` as text: the summary of how a job used its GPUs (as the job page and the end-of-job
mail give it), the hint where the portal gives one, and one line per GPU."""

from __future__ import annotations

from .i18n import gettext_ as _
from .render import table


def _gb(mib) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f}"


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summary(answer: dict) -> str:
    """The figures first, then the GPUs; "so far" while the job has not ended."""
    lines = [(_("Job %(id)s held %(h)s GPU-hours") if answer.get("finished")
              else _("Job %(id)s has held %(h)s GPU-hours so far")) % {
        "id": answer["job"], "h": f"{answer['gpu_hours_held']:.2f}"}]
    if not answer.get("readings"):
        lines.append(_("No readings of its GPUs were kept for the time it held them."))
        return "\n".join(lines)
    lines.append(_("Mean GPU utilisation: %(u)s %%") % {"u": f"{answer['mean_gpu_utilization']:.0f}"})
    lines.append(_("Peak GPU memory: %(peak)s of %(total)s GB") % {
        "peak": _gb(answer.get("peak_memory_mb")), "total": _gb(answer.get("memory_total_mb"))})
    lines.append(_("Idle (below %(pct)s %% utilisation): %(share)s %% of the readings") % {
        "pct": answer.get("idle_below_pct"), "share": f"{(answer.get('idle_share') or 0) * 100:.0f}"})
    for stretch in answer.get("idle_stretches") or []:
        lines.append(_("Idle from %(start)s to %(end)s (%(m)s min)") % {
            "start": stretch["start"][:16].replace("T", " "), "end": stretch["end"][:16].replace("T", " "),
            "m": stretch["minutes"]})
    if answer.get("hint"):
        lines.append(answer["hint"])
    rows = [[s["gpu"], s["model"], _rounded(_mean(s["utilization"])), _gb(max(
        (m for m in s["memory_mb"] if m is not None), default=None))] for s in answer.get("series") or []]
    if rows:
        lines += ["", table([_("GPU"), _("MODEL"), _("MEAN UTIL %"), _("PEAK MEM GB")], rows)]
    return "\n".join(lines)


def _rounded(value: float | None):
    return None if value is None else round(value)
