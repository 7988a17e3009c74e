"""Requests, decisions, the reservations calendar and notifications. Thin: rules live in ``services``."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from fleet.catalogue import gpu_model_catalogue
from governance import services
from governance.forms import PreferencesForm, RequestForm
from governance.models import Notification, NotificationPreference, RequestState
from governance.notifications.services import preferences
from governance.queries import impact_sections
from gpuportal.text.dates import day_start
from scheduling.jobs.queries import in_queue_order, quota_usage
from scheduling.models import Job, Reservation


@login_required
def request_list(request):
    state = request.GET.get("state", "")
    requests = services.requests_for(request.user)
    if state in RequestState.values:
        requests = requests.filter(state=state)
    return render(request, "governance/request_list.html", {
        "to_decide": services.pending_for(request.user), "requests": requests[:200], "state": state,
        "states": RequestState.choices})


@login_required
def request_new(request):
    form = RequestForm(request.POST or None, user=request.user, initial={
        k: request.GET[k] for k in ("kind", "job", "tenant", "gpu_model") if k in request.GET})
    own_preemptions = []
    if request.method == "POST":
        # A request that would stop the requester's own running jobs names them first and is sent only when
        # the requester confirms ("preempt").
        confirmed = request.POST.get("own_jobs") == "preempt"

        def confirm(previewed) -> bool:
            if not confirmed:
                own_preemptions.extend(services.own_jobs_preempted(previewed))
            return not own_preemptions

        created = form.submit(confirm)
        if created is not None:
            messages.success(request, _("Request #%(id)d sent to %(who)s.") % {
                "id": created.pk, "who": created.get_scope_display().lower()})
            return redirect("governance:request-detail", pk=created.pk)
    return render(request, "governance/request_form.html", {"form": form, "own_preemptions": own_preemptions},
                  status=400 if form.errors else 200)


def _detail_page(request, item, comment: str = "", comment_error: str = "", status: int = 200):
    """A pending request shows what approving it would do now; a decided one shows its decision instead.
    After a refused decision the comment typed is kept and what was wrong is said beside it."""
    refusal = services.decision_refusal(request.user, item)
    context = {"item": item, "refusal": refusal, "comment": comment, "comment_error": comment_error,
               "max_comment": services.MAX_COMMENT}
    if item.is_pending:
        impact = (None if refusal else services.impact_of(item)) or item.impact  # the queue as it is now
        queue = Job.objects.visible_to(request.user).waiting().filter(tenant=item.tenant)
        if item.gpu_model:
            queue = queue.filter(gpu_model=item.gpu_model)
        queue = in_queue_order(queue.select_related("queue_state", "task_type", "owner"), 10)
        context.update(
            impact=impact_sections(impact, request.user) if impact else None,
            usage=[row for row in quota_usage(request.user) if row.tenant == item.tenant.name
                   and (not item.gpu_model or row.gpu_model == item.gpu_model)],
            queue=queue)
    return render(request, "governance/request_detail.html", context, status=status)


@login_required
def request_detail(request, pk):
    return _detail_page(request, get_object_or_404(services.requests_for(request.user), pk=pk))


@login_required
@require_POST
def request_decide(request, pk):
    item = get_object_or_404(services.requests_for(request.user), pk=pk)
    approve = request.POST.get("decision") == "approve"
    comment = request.POST.get("comment", "")
    try:
        services.decide(request.user, item, approve, comment)
        messages.success(request, _("Request #%(id)d %(what)s.") % {
            "id": item.pk, "what": _("approved") if approve else _("denied")})
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    except ValidationError as exc:
        return _detail_page(request, item, comment=comment, status=400,
                            comment_error=" ".join(exc.message_dict.get("comment", exc.messages)))
    return redirect("governance:request-detail", pk=item.pk)


@login_required
def reservations_calendar(request):
    """Four weeks of reservations of one GPU model, a week per row, each day listing who holds what."""
    catalogue = gpu_model_catalogue()
    models = sorted(catalogue)
    model = request.GET.get("model") or (models[0] if models else "")
    today = timezone.localdate()
    first = today - timedelta(days=today.weekday())
    last = first + timedelta(days=28)
    # Every tenant's reservations: they are capacity everyone plans around (the queue already says
    # "reserved for tenant X"), not job data, so they are not scoped to the reader's tenants.
    reservations = list(Reservation.objects.filter(
        gpu_model=model, end__gt=day_start(first), start__lt=day_start(last)).select_related("tenant"))
    weeks = []
    for week in range(4):
        days = []
        for offset in range(7):
            day = first + timedelta(days=week * 7 + offset)
            holding = [r for r in reservations
                       if timezone.localtime(r.start).date() <= day <= timezone.localtime(r.end).date()]
            days.append({"day": day, "today": day == today, "reservations": holding,
                         "gpus": sum(r.gpus for r in holding)})
        weeks.append(days)
    return render(request, "governance/calendar.html", {
        "models": models, "model": model, "weeks": weeks, "reservations": reservations,
        "capacity": catalogue[model].total_gpus if model in catalogue else 0})


@login_required
def notifications(request):
    choices = preferences(request.user)
    form = PreferencesForm(request.POST or None, initial_choices=choices)
    if request.method == "POST" and request.POST.get("action") == "read":
        Notification.objects.filter(user=request.user, read_at__isnull=True).update(read_at=timezone.now())
        return redirect("governance:notifications")
    if request.method == "POST" and form.is_valid():
        for kind in choices:
            NotificationPreference.objects.update_or_create(user=request.user, kind=kind, defaults={
                "in_app": form.cleaned_data[f"{kind}__app"], "email": form.cleaned_data[f"{kind}__email"]})
        messages.success(request, _("Your notification choices are saved."))
        return redirect("governance:notifications")
    return render(request, "governance/notifications.html", {
        "items": Notification.objects.filter(user=request.user)[:100], "form": form})
