"""Portal pages. Thin: read through ``visible_to``, act through ``services``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from fleet.inventory import gpu_series
from fleet.models import Cluster
from fleet.queries import capacity_summary
from gpuportal.storage import pagecache
from scheduling.executors import read_job_log
from scheduling.executors.logs import DEFAULT_TAIL, kept_log
from scheduling.jobs import actions as job_actions
from scheduling.jobs import cloning, dependencies, listing, queries
from scheduling.jobs.attempts import attempts_of, current_attempt, stopped_by
from scheduling.jobs.efficiency import efficiency_of
from scheduling.jobs.forms import JobSubmitForm
from scheduling.jobs.limits import CANCEL_REASON_MAX
from scheduling.jobs.live import page_version
from scheduling.jobs.progress import estimated_finish, run_deadline
from scheduling.models import LONG_RUNNING_KINDS, Job, WorkloadKind
from scheduling.passes import preview
from scheduling.templates import services as job_templates
from scheduling.workloads.queries import count_pairs, ended, live_state, may_open, port_links, visible_groups
from tenants import access

#: Arrays and services shown above the job list (the newest).
GROUP_ROWS = 20


def _jobs(user):
    return Job.objects.visible_to(user).for_listing()


@login_required
def dashboard(request):
    return pagecache.cached_page(request, "dashboard", lambda: _render_dashboard(request))


def _render_dashboard(request):
    user = request.user
    jobs = _jobs(user)
    return render(request, "scheduling/dashboard.html", {
        "quota_rows": queries.quota_usage(user),
        "my_jobs": queries.table_rows(jobs.filter(owner=user))[:10],
        "queue": queries.in_queue_order(queries.table_rows(jobs.waiting()), 20),
        "capacity": capacity_summary(),
    })


@login_required
def job_list(request):
    shaped = _shaped_list(request, remember=True)
    for name, problems in shaped["shaped"].problems.items():
        messages.error(request, _("%(field)s, not applied: %(problem)s") % {
            "field": shaped["filter"].form.fields[name].label, "problem": " ".join(problems)})
    groups = visible_groups(request.user, GROUP_ROWS)
    return render(request, "scheduling/job_list.html", {
        **shaped, "groups": [(g, count_pairs(g), ended(g)) for g in groups]})


@login_required
def job_list_rows(request):
    """The job list's table alone, for the page's refresh in place (static/js/live.js)."""
    return render(request, "scheduling/_job_rows.html", _shaped_list(request, remember=False))


def _shaped_list(request, remember: bool) -> dict:
    # An array's tasks and a service's replicas are one row each in the groups table, not one row per member.
    shaped = listing.job_list(request, _jobs(request.user).filter(group__isnull=True), remember=remember)
    page = Paginator(shaped.jobs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return {"filter": shaped.filterset, "shaped": shaped, "page": page, "query": query.urlencode(),
            "columns": shaped.columns}


@login_required
def job_detail(request, pk):
    job = get_object_or_404(_jobs(request.user).with_placement().select_related("cluster"), pk=pk)
    timeline = queries.timeline(job)
    live = live_state(job) if job.kind in LONG_RUNNING_KINDS else None
    version = page_version(job, timeline, live)
    if request.GET.get("since") == version:  # the page's refresh in place (static/js/live.js): nothing changed
        return HttpResponse(status=204)
    per_node: dict = {}
    gpus = job.held_gpus()
    series = gpu_series(gpu.pk for gpu in gpus) if not job.is_terminal else {}
    for gpu in gpus:
        latest = series.get(gpu.pk, {}).get("latest")
        gpu.latest_util = latest.utilization_pct if latest else None
        per_node.setdefault(gpu.node, []).append(gpu)
    return render(request, "scheduling/job_detail.html", {
        "job": job, "placement": sorted(per_node.items(), key=lambda item: item[0].name),
        "timeline": timeline, "live_version": version,
        "max_cancel_reason": CANCEL_REASON_MAX,
        "last_checkpoint": job.checkpoints.first(), "artifacts": list(job.artifacts.all()),
        "estimated_finish": estimated_finish(job), "attempts": attempts_of(job, request.user),
        "stopped": stopped_by(job, request.user),
        "model_position": job.model_queue_position,
        "can_cancel": not job.is_terminal and access.can_manage_job(request.user, job.tenant_id, job.owner_id),
        "deadline": run_deadline(job), "max_runtime_seconds": (job.max_runtime_minutes or 0) * 60,
        "run_seconds": ((job.finished_at or timezone.now()) - job.started_at).total_seconds() if job.started_at else 0,
        "log": _log_of(job, request.GET.get("attempt", "")),
        "live": live,
        "can_open": job.kind == WorkloadKind.NOTEBOOK and may_open(request.user, job),
        "chain": dependencies.chain(job, request.user),
        "port_links": port_links(job), "can_open_ports": bool(job.ports) and may_open(request.user, job),
        "efficiency": efficiency_of(job, with_series=False) if job.admitted_at or job.is_terminal else None,
        "can_clear_avoidance": job.is_waiting and bool((job.executor_state or {}).get("avoid_nodes"))
        and access.is_platform_admin(request.user),
    })


def _log_of(job: Job, asked: str):
    """The log shown: the current attempt's, or an earlier one's (``?attempt=N``: the lines the portal kept)."""
    number = int(asked) if asked.isascii() and asked.isdigit() and len(asked) < 7 else None
    if number is not None and number != current_attempt(job):
        kept = kept_log(job, number, DEFAULT_TAIL)
        if kept is not None:
            return kept
    return read_job_log(job, DEFAULT_TAIL)


def _job_number(text: str) -> bool:
    """Whether ``text`` is a job id as a query gives it (ASCII digits: ``int`` refuses "²", which ``isdigit``
    accepts)."""
    return text.isascii() and text.isdigit() and len(text) < 19


@login_required
def job_submit(request):
    """The submit form. ``?template=<version id>`` starts from a template version (its defaults prefill the
    form, its parameters show, the job records the version); ``?clone=<job id>`` prefills a job's request;
    ``?after=<job id>`` a dependency on that job (checked, as typed, when the form is sent)."""

    posted = request.method == "POST"
    reference = request.POST.get("use_template") if posted else request.GET.get("template")
    version = job_templates.usable_template_version(request.user, reference) if reference else None
    gone = _("Template version %(v)s is not one you may use.") % {"v": reference}
    if reference and version is None and not posted:
        messages.error(request, gone)
    initial, clone_of = {}, None
    if version is not None and not posted:
        initial = {**version.defaults, "kind": version.template.kind, "template_version": version.pk}
    elif not posted and request.GET.get("clone"):
        clone_of = Job.objects.visible_to(request.user).select_related("tenant", "project", "task_type", "group") \
            .filter(pk=request.GET["clone"] if _job_number(request.GET["clone"]) else None).first()
        if clone_of is None:
            messages.error(request, _("Job %(id)s is not among those you may see; the form starts empty.") % {
                "id": request.GET["clone"]})
        else:
            initial = cloning.request_of(clone_of)
            if initial.get("tenant") and "/" not in str(initial.get("project", "/")):
                initial["project"] = f"{initial['tenant']}/{initial['project']}"
    after = request.GET.get("after", "")
    if not posted and _job_number(after):  # "Submit a job that waits for it": Slurm's afterok
        initial["depends_on"] = f"afterok:{after}"
    form = JobSubmitForm(request.POST or None, user=request.user, version=version, initial=initial)
    if posted and reference and version is None:  # archived meanwhile: its parameters cannot be applied
        form.is_valid()
        form.add_error(None, gone)
    own_preemptions = []
    if posted and not (reference and version is None):
        # Before a job that would stop the user's own running jobs is stored, the page names them and asks:
        # submit anyway ("preempt"), or submit so that it spares them ("spare").
        choice = request.POST.get("own_jobs", "")
        choice = choice if choice in ("preempt", "spare") else ""
        extra = {"spare_own_jobs": True} if choice == "spare" else {}

        def confirm(job_request) -> bool:
            if choice:
                return True
            own_preemptions.extend(preview.own_preemptions(request.user, job_request))
            return not own_preemptions

        job = form.submit(extra, confirm)
        if job is not None:
            messages.success(request, _("Job #%(id)d submitted.") % {"id": job.pk})
            return redirect("scheduling:job-detail", pk=job.pk)
    templates = [(t, job_templates.latest_version(t)) for t in job_templates.usable_templates(request.user)]
    return render(request, "scheduling/job_form.html", {
        "form": form, "version": version, "clone_of": clone_of, "own_preemptions": own_preemptions,
        "templates": [(t, v) for t, v in templates if v is not None]}, status=400 if form.errors else 200)


@login_required
@require_POST
def job_cancel(request, pk):
    job = get_object_or_404(_jobs(request.user), pk=pk)
    reason = request.POST.get("reason", "").strip()
    if len(reason) > CANCEL_REASON_MAX:  # refused, never cut: what is stored is what was written
        messages.error(request, _("Reason: at most %(max)d characters (got %(n)d); the job was not cancelled.") % {
            "max": CANCEL_REASON_MAX, "n": len(reason)})
        return redirect("scheduling:job-detail", pk=job.pk)
    try:
        job_actions.cancel_job(request.user, job, reason)
        messages.success(request, _("Job #%(id)d cancelled.") % {"id": job.pk})
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("scheduling:job-detail", pk=job.pk)


@login_required
@require_POST
def job_hold(request, pk, hold: bool):
    job = get_object_or_404(_jobs(request.user), pk=pk)
    try:
        job_actions.set_hold(request.user, job, hold)
        messages.success(request, (_("Job #%(id)d held: it keeps its place but will not start until released.")
                                   if hold else _("Job #%(id)d released.")) % {"id": job.pk})
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("scheduling:job-detail", pk=job.pk)


@login_required
@require_POST
def job_clear_avoidance(request, pk):
    job = get_object_or_404(_jobs(request.user), pk=pk)
    try:
        job_actions.clear_avoidance(request.user, job)
        messages.success(request, _("Job #%(id)d may run on the nodes it avoided again.") % {"id": job.pk})
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("scheduling:job-detail", pk=job.pk)


@login_required
def queue(request):
    cluster, gpu_model = request.GET.get("cluster", ""), request.GET.get("gpu_model", "")
    return render(request, "scheduling/queue.html", {
        "rows": queries.cluster_queue(request.user, cluster or None, gpu_model or None),
        "shares": queries.fair_share_report(), "clusters": Cluster.objects.all(), "cluster": cluster,
        "models": queries.queue_models(), "gpu_model": gpu_model,
        "time_zone": timezone.get_current_timezone_name()})
