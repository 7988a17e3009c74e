"""Report data -> sections of a page: a title, a plotly figure, the same data as a table, a CSV name.

One list of sections feeds the page (chart and table), the CSV download and the tests, so what a chart
shows and what the CSV holds cannot drift apart. Figures are plain plotly.js JSON (``data`` and
``layout``); the page draws them with plotly.js's basic bundle (static/plotly/plotly-basic.min.js).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from gpuportal.text.dates import next_month
from gpuportal.text.exports import csv_text
from metering.models import CapacityAction
from metering.reports.contract import Advice, MonthlyReportData, SlurmClusterUsage, SlurmOwnerUsage

#: The trace types of plotly.js's basic bundle, the one the pages load (a quarter of the full bundle's 4.8 MB,
#: so a page is ready sooner): a figure may use no other.
BUNDLE_TRACE_TYPES = frozenset({"bar", "pie", "scatter"})


@dataclass
class Section:
    """One section of a report or operations page: ``name`` (the CSV's and the anchor's), its translated
    ``title``, the table's ``columns`` as (key of a row, translated header), the ``rows`` (a row of the report's
    data, keyed as ``metering.reports.contract`` documents, units in the header), the plotly ``figure`` drawn
    above it (None: a table only) and a ``note`` under the title."""

    name: str
    title: str
    columns: list[tuple[str, str]]
    rows: list[dict]
    figure: dict | None = None
    note: str = ""

    def table(self) -> list[list]:
        return [[row.get(key) for key, _label in self.columns] for row in self.rows]

    def csv(self) -> str:
        return csv_text([key for key, _label in self.columns], self.table())


def _layout(y_title: str, **extra) -> dict:
    """The layout every chart shares.

    The section's heading names the chart, so there is no title inside it. The legend sits above the plot,
    where it cannot cover the x-axis labels (the year under the first date was hidden behind it), and the
    margins grow to fit long tick labels and axis titles (``automargin``) instead of cutting them off. Every
    quantity charted is zero or more, so the y axis starts at zero even when all values are zero."""
    layout = {"height": 320, "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
              "xaxis": {"automargin": True},
              "yaxis": {"title": {"text": y_title}, "automargin": True, "rangemode": "tozero"},
              "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}}
    layout.update(extra)
    return layout


#: A chart of days spans at least this many, so that plotly ticks days, never the hours of a single one.
MIN_DAY_SPAN = 7


def day_axis(days: list[str], first: date | None = None, last: date | None = None) -> dict:
    """An x axis of whole days from ``first`` to ``last`` (default: the days charted), each day's bar or point
    in the middle of its slot, at least ``MIN_DAY_SPAN`` days wide.

    On the first day of a month plotly zoomed into the hours of that one day ("00:00:00 Dec 1, 2026"); a
    month's chart spans the month, so the days to come show as empty, not as a day stretched to full width."""
    known = sorted(date.fromisoformat(str(d)[:10]) for d in days)
    first = first or (known[0] if known else None)
    last = last or (known[-1] if known else None)
    if first is None or last is None:
        return {"automargin": True}
    last = max(last, first + timedelta(days=MIN_DAY_SPAN - 1))
    return {"automargin": True, "type": "date",
            "range": [f"{first - timedelta(days=1):%Y-%m-%d} 12:00", f"{last:%Y-%m-%d} 12:00"]}


def month_days(month: str) -> tuple[date, date]:
    """The first and last day of a report's ``YYYY-MM``."""
    first = date.fromisoformat(f"{month}-01")
    return first, next_month(first) - timedelta(days=1)


def bars(rows: list[dict], label: str, series: list[tuple[str, str]], y_title: str) -> dict:
    """Grouped bars: one trace per (key, name) of ``series`` over the ``label`` column."""
    x = [str(row[label]) for row in rows]
    return {"data": [{"type": "bar", "name": name, "x": x, "y": [row.get(key) for row in rows]}
                     for key, name in series],
            "layout": _layout(y_title, barmode="group")}


def lines_by(rows: list[dict], x_key: str, group_key: str, y_key: str, y_title: str, kind: str = "scatter",
             stacked: bool = False, span: tuple[date, date] | None = None) -> dict:
    """One trace per value of ``group_key`` (a GPU model, a tenant) over ``x_key`` (a day), on an axis of whole
    days (``day_axis``: the ``span`` given, else the days charted)."""
    groups: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for row in rows:
        xs, ys = groups[str(row[group_key])]
        xs.append(row[x_key])
        ys.append(row.get(y_key))
    trace = {"type": kind} if kind == "bar" else {"type": "scatter", "mode": "lines+markers"}
    layout = _layout(y_title, **({"barmode": "stack"} if stacked else {}))
    layout["xaxis"] = day_axis([row[x_key] for row in rows], *(span or (None, None)))
    return {"data": [{**trace, "name": name, "x": xs, "y": ys} for name, (xs, ys) in sorted(groups.items())],
            "layout": layout}


def _usage_columns(first: str) -> list[tuple[str, str]]:
    return [("name", first), ("gpu_hours_allocated", _("GPU-hours allocated")),
            ("gpu_hours_used", _("GPU-hours used")), ("efficiency", _("Efficiency")), ("cost", _("Cost"))]


def _usage_section(name: str, title: str, first: str, rows: list[dict]) -> Section:
    return Section(name, title, _usage_columns(first), rows, bars(
        rows, "name", [("gpu_hours_allocated", _("allocated")), ("gpu_hours_used", _("used"))], _("GPU-hours")))


def _waits_in_hours(rows: list[dict]) -> list[dict]:
    """Waits are read in hours on the pages and in their CSV ("6.0", not "21600.0 s")."""
    return [{**row, "p95_hours": round((row["wait_seconds_p95"] or 0) / 3600, 2),
             "median_hours": round((row["wait_seconds_median"] or 0) / 3600, 2)} for row in rows]


def _wait_columns(first: str) -> list[tuple[str, str]]:
    return [("name", first), ("jobs", _("Jobs")), ("median_hours", _("Median wait (h)")),
            ("p95_hours", _("p95 wait (h)"))]


def _wait_section(name: str, title: str, first: str, rows: list[dict]) -> Section:
    hours = _waits_in_hours(rows)
    return Section(name, title, _wait_columns(first), hours,
                   bars(hours, "name", [("median_hours", _("median")), ("p95_hours", _("p95"))], _("hours")))


def advice_section(name: str, title: str, advice: list[Advice]) -> Section:
    """The capacity advice as a table: the action by its label (the code stays in the JSON and the API)."""
    rows = [{**row, "action_label": _action_label(row.get("action", ""))} for row in advice]
    return Section(name, title, [("gpu_model", _("GPU model")), ("action_label", _("Action")),
                                 ("evidence", _("Evidence"))], rows)


def _action_label(code: str) -> str:
    try:
        return str(CapacityAction(code).label)
    except ValueError:
        return code


def report_sections(data: MonthlyReportData) -> list[Section]:
    """Every chart and table of a monthly report, in page order."""
    sections = [
        Section("daily", _("GPU-hours per day"), [("day", _("Day")), ("gpu_model", _("GPU model")),
                                                  ("gpu_hours_allocated", _("GPU-hours allocated")),
                                                  ("gpu_hours_used", _("GPU-hours used"))], data["daily"],
                lines_by(data["daily"], "day", "gpu_model", "gpu_hours_allocated", _("allocated GPU-hours"),
                         kind="bar", stacked=True, span=month_days(data["month"]))),
    ]
    if data["scope"] == "platform":
        sections.append(_usage_section("by_tenant", _("By tenant"), _("Tenant"), data["by_tenant"]))
    sections += [
        _usage_section("by_project", _("By project"), _("Project"), data["by_project"]),
        _usage_section("by_task_type", _("By task type"), _("Task type"), data["by_task_type"]),
        _usage_section("by_gpu_model", _("By GPU model"), _("GPU model"), data["by_gpu_model"]),
    ]
    failures = [{"category": k, "jobs": v} for k, v in data["failures_by_category"].items()]
    sections.append(Section("failures", _("Failed jobs by category"),
                            [("category", _("Category")), ("jobs", _("Jobs"))], failures,
                            bars(failures, "category", [("jobs", _("failed jobs"))], _("jobs"))))
    sections += [
        _wait_section("wait_by_task_type", _("Wait by task type"), _("Task type"), data["wait_by_task_type"]),
        _wait_section("wait_by_gpu_model", _("Wait by GPU model"), _("GPU model"), data["wait_by_gpu_model"]),
    ]
    top = data["top_users"]
    sections.append(Section("top_users", _("Top users"), [*_usage_columns(_("User")), ("jobs", _("Jobs"))], top,
                            bars(top, "name", [("gpu_hours_allocated", _("allocated"))], _("GPU-hours"))))
    if data.get("least_efficient_jobs"):
        sections.append(Section(
            "least_efficient_jobs", _("Least efficient large jobs"),
            [("job", _("Job")), ("name", _("Name")), ("user", _("User")), ("tenant", _("Tenant")), ("gpus", _("GPUs")),
             ("gpu_hours_held", _("GPU-hours held")), ("gpu_hours_used", _("GPU-hours used")),
             ("mean_gpu_utilization", _("Mean GPU utilisation (%)")), ("hint", _("Hint"))],
            data["least_efficient_jobs"], note=_("Large jobs that ended this month, least used first: held versus "
                                                 "used GPU-hours, from the readings of the GPUs each held.")))
    quota = [{**row, "label": f"{row['tenant']} {row['gpu_model']}"} for row in data["quota_vs_use"]]
    sections.append(Section(
        "quota_vs_use", _("Quota versus use"),
        [("tenant", _("Tenant")), ("gpu_model", _("GPU model")), ("guaranteed", _("Guaranteed")),
         ("limit", _("Limit")), ("average_gpus_allocated", _("Average GPUs allocated")),
         ("share_of_guarantee", _("Share of guarantee"))], quota,
        bars(quota, "label", [("guaranteed", _("guaranteed")), ("limit", _("limit")),
                              ("average_gpus_allocated", _("average allocated"))], _("GPUs"))))
    if data.get("slurm"):
        sections.append(slurm_section(data["slurm"], data["tenant"] if data["scope"] == "tenant" else None))
    if data["scope"] == "platform":
        sections += platform_sections(data)
    return sections


def owner_label(row: SlurmOwnerUsage) -> str:
    """Whose GPU-hours a row of a Slurm cluster's usage are: the tenant, or the account no tenant is mapped to."""
    if row["tenant"]:
        return row["tenant"]
    return _("unmapped account %(account)s") % {"account": row["account"]}


def slurm_cluster_note(cluster: SlurmClusterUsage, tenant: str | None = None) -> str:
    """slurmdb's own figures beside the report's, so a reader can check that the whole cluster is counted. A
    tenant's report (``tenant``) holds the tenant's share on both sides: its portal jobs and the work its
    accounts submitted directly, which the note says, so that slurmdb's figure is not read as the cluster's."""
    values = {"cluster": cluster["cluster"], "portal": cluster["portal_gpu_hours"],
              "outside": cluster["outside_gpu_hours"], "total": cluster["total_gpu_hours"],
              "slurmdb": cluster["slurmdb_gpu_hours"], "slurmdb_portal": cluster["slurmdb_portal_gpu_hours"]}
    if tenant:
        return _("%(cluster)s, tenant %(tenant)s only: %(portal)s GPU-hours allocated by the portal to the tenant's "
                 "jobs and %(outside)s held by work its Slurm accounts submitted directly, %(total)s in all; "
                 "slurmdb accounted %(slurmdb)s GPU-hours for the same jobs, %(slurmdb_portal)s of them for jobs "
                 "the portal submitted.") % {**values, "tenant": tenant}
    return _("%(cluster)s: %(portal)s GPU-hours allocated by the portal and %(outside)s held by work submitted to "
             "Slurm directly, %(total)s in all; slurmdb accounted %(slurmdb)s GPU-hours, %(slurmdb_portal)s of them "
             "for jobs the portal submitted.") % values


def slurm_section(clusters: list[SlurmClusterUsage], tenant: str | None = None) -> Section:
    """The Slurm clusters as a whole (a tenant's report: the tenant's share): per tenant and unmapped account,
    the portal's GPU-hours beside those of the work submitted to Slurm directly."""
    rows = [{**owner, "cluster": cluster["cluster"], "owner": owner_label(owner)}
            for cluster in clusters for owner in cluster["owners"]]
    labelled = [{**row, "label": f"{row['cluster']} {row['owner']}"} for row in rows]
    return Section("slurm", _("Slurm clusters: portal and outside work"), [
        ("cluster", _("Cluster")), ("owner", _("Tenant or account")), ("portal_gpu_hours", _("Portal GPU-hours")),
        ("outside_gpu_hours", _("Outside GPU-hours")), ("total_gpu_hours", _("GPU-hours in all")),
        ("outside_jobs", _("Outside jobs started"))], rows,
        bars(labelled, "label", [("portal_gpu_hours", _("portal")), ("outside_gpu_hours", _("outside"))],
             _("GPU-hours")),
        note=" ".join(slurm_cluster_note(cluster, tenant) for cluster in clusters))


def platform_sections(data: MonthlyReportData) -> list[Section]:
    utilisation = data["utilisation_by_gpu_model"]
    rates = [{**row, "allocated_pct": round((row["allocation_rate"] or 0) * 100, 1)} for row in utilisation]
    return [
        Section("utilisation", _("Utilisation per GPU model"), [
            ("gpu_model", _("GPU model")), ("capacity_gpus", _("GPUs")),
            ("capacity_gpu_hours", _("Capacity GPU-hours")),
            ("allocated_gpu_hours", _("Allocated GPU-hours")), ("allocation_rate", _("Allocated share")),
            ("mean_utilization_pct", _("Mean utilisation %")), ("idle_gpu_hours", _("Idle GPU-hours")),
            ("peak_demand_gpus", _("Peak demand (GPUs)")), ("days_over_capacity", _("Days demand > capacity"))],
            utilisation, bars(rates, "gpu_model", [("allocated_pct", _("allocated %")),
                                                   ("mean_utilization_pct", _("utilisation %"))], "%")),
        Section("capacity_daily", _("Peak demand versus capacity"), [
            ("day", _("Day")), ("gpu_model", _("GPU model")), ("capacity_gpus", _("GPUs")),
            ("peak_allocated_gpus", _("Peak allocated")), ("peak_demand_gpus", _("Peak demand")),
            ("mean_utilization_pct", _("Mean utilisation %")),
            ("gpu_memory_high_water_mb", _("GPU memory high-water (MiB)"))],
            data["capacity_daily"], _demand_figure(data["capacity_daily"], month_days(data["month"]))),
        Section("longest_waiting_tenants", _("Tenants who waited longest"), _wait_columns(_("Tenant")),
                _waits_in_hours(data["longest_waiting_tenants"])),
        advice_section("recommendations", _("Capacity recommendations"), data["recommendations"]),
    ]


#: The three lines of each GPU model's panel in the peak-demand chart: (column, name, plotly style). Allocation
#: is a filled area under the demand line (demand is never below it, so both stay visible where they are
#: equal), capacity a dashed step line in grey.
DEMAND_SERIES = (
    ("peak_allocated_gpus", gettext_lazy("peak allocated"),
     {"mode": "lines", "fill": "tozeroy", "line": {"color": "#9ecae1", "width": 1}}),
    ("capacity_gpus", gettext_lazy("capacity"),
     {"mode": "lines", "line": {"color": "#525252", "dash": "dash", "shape": "hv"}}),
    ("peak_demand_gpus", gettext_lazy("peak demand"),
     {"mode": "lines+markers", "line": {"color": "#d94801", "width": 2}, "marker": {"size": 5}}),
)
PANEL_HEIGHT = 170


def _demand_figure(rows: list[dict], span: tuple[date, date]) -> dict:
    """Peak demand, peak allocation and capacity per day, each GPU model in a panel of its own (shared days).

    On one pair of axes, models with the same number of GPUs drew the same capacity line, and two of the
    three lines were hidden behind the third; a panel per model keeps every line in sight and lets each
    model's axis fit its own size."""
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_model[str(row["gpu_model"])].append(row)
    data = []
    layout = _layout("", height=60 + PANEL_HEIGHT * max(1, len(by_model)),
                     grid={"rows": max(1, len(by_model)), "columns": 1, "pattern": "coupled", "ygap": 0.25},
                     xaxis=day_axis([row["day"] for row in rows], *span))
    for number, (model, model_rows) in enumerate(sorted(by_model.items()), start=1):
        axis = "" if number == 1 else str(number)
        layout[f"yaxis{axis}"] = {"title": {"text": _("%(model)s GPUs") % {"model": model}}, "automargin": True,
                                  "rangemode": "tozero"}
        for key, name, style in DEMAND_SERIES:
            data.append({"type": "scatter", **style, "name": str(name), "legendgroup": key,
                         "showlegend": number == 1, "xaxis": "x", "yaxis": f"y{axis}",
                         "x": [row["day"] for row in model_rows], "y": [row.get(key) for row in model_rows]})
    return {"data": data, "layout": layout}


def section_by_name(sections: list[Section], name: str) -> Section | None:
    return next((s for s in sections if s.name == name), None)
