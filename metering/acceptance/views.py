"""The acceptance checklist page: the four rows, a pilot's notes, the notes' screenshots.

Thin: the rows and the permission rules are ``metering.acceptance.checklist``'s; the note's checks are the form's."""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from metering.acceptance import checklist as acceptance
from metering.forms import AcceptanceNoteForm

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _require_reader(user) -> None:
    if not acceptance.can_read(user):
        raise PermissionDenied(_("The acceptance checklist is for platform admins and managers."))


def _page(request, bound: AcceptanceNoteForm | None = None, status: int = 200):
    """The checklist; a refused note keeps what was typed in its row's form (or above the rows when the row
    itself was not one of the four)."""
    rows = acceptance.checklist()
    can_add = acceptance.can_add_notes(request.user)
    stray, forms = bound, {}
    for row in rows:
        if bound is not None and bound.data.get("area") == row.area:
            forms[row.area], stray = bound, None
        elif can_add:
            forms[row.area] = AcceptanceNoteForm(initial={"area": row.area}, auto_id=f"id_{row.area}_%s")
    return render(request, "metering/acceptance.html", {
        "rows": rows, "entries": [(row, forms.get(row.area)) for row in rows], "can_add": can_add,
        "stray_form": stray}, status=status)


@login_required
@require_GET
def checklist(request):
    _require_reader(request.user)
    return _page(request)


@login_required
@require_POST
def note_add(request):
    _require_reader(request.user)
    if not acceptance.can_add_notes(request.user):
        raise PermissionDenied(_("Only platform admins add acceptance evidence."))
    area = request.POST.get("area", "")
    form = AcceptanceNoteForm(request.POST, request.FILES, auto_id=f"id_{_UNSAFE_NAME.sub('', area)}_%s")
    if not form.is_valid():
        return _page(request, form, status=400)
    note = form.save(request.user)
    messages.success(request, _("Your note was added to the %(area)s row.") % {"area": note.get_area_display()})
    return redirect(reverse("acceptance:checklist") + f"#row-{note.area}")


@login_required
@require_GET
def screenshot(request, pk: int):
    """A note's screenshot, shown in the browser, typed as it was checked when it was uploaded."""
    note = acceptance.screenshot_of(request.user, pk)
    if note is None:
        raise Http404(_("This note has no screenshot."))
    response = HttpResponse(bytes(note.screenshot), content_type=note.screenshot_type or "application/octet-stream")
    name = _UNSAFE_NAME.sub("_", note.screenshot_name)[-100:] or f"screenshot-{note.pk}"
    response["Content-Disposition"] = f'inline; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response
