"""How a form field and its errors are drawn (templates/_form_field.html, _form_errors.html).

Django points ``aria-describedby`` at ``<id>_helptext`` and ``<id>_error``, ids our templates did not give, so a
screen reader announced nothing. ``control`` names the ids the field template really writes: the field's error
list (``error-<name>``) and its help (``<id>_helptext``). ``linked`` turns the portal's own addresses in a
message ("Ask for quota: /requests/new/?kind=quota…") into links, escaping everything else.
"""

import re
from urllib.parse import urlsplit

from django import template
from django.urls import Resolver404, resolve
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()

#: A site-relative address inside a sentence: after a space, a colon or a bracket (Chinese ones too) or first, a
#: slash, no second slash, up to the next space. A sentence's closing full stop or bracket stays outside the link.
_SITE_PATH = re.compile(r"(?:(?<=[\s:(：（])|^)(/(?!/)[^\s<>\"'。，；）]*[^\s<>\"'.,;:)\]。，；）])")


@register.filter
def error_id(field) -> str:
    """The id of the field's error list (the summary links to the field, the field to its errors)."""
    return f"error-{field.html_name}"


@register.filter
def help_id(field) -> str:
    return f"{field.auto_id or field.html_name}_helptext"


@register.filter
def control(field):
    """The field's input, described by the errors and help the field template shows next to it."""
    described = [error_id(field)] if field.errors else []
    if field.help_text:
        described.append(help_id(field))
    # With neither, Django adds no reference either.
    return field.as_widget(attrs={"aria-describedby": " ".join(described)} if described else None)


def _is_page(path: str) -> bool:
    """Only an address of one of the portal's pages becomes a link: a message may quote what a user typed, and a
    browser reads ``/\\host`` as another site."""
    if "\\" in path:
        return False
    try:
        resolve(urlsplit(path).path)
    except Resolver404:
        return False
    return True


@register.filter
def linked(message) -> str:
    """``message`` escaped, with each of the portal's own addresses in it as a link."""
    parts = _SITE_PATH.split(str(message))
    html = [format_html('<a href="{}">{}</a>', part, part) if i % 2 and _is_page(part) else escape(part)
            for i, part in enumerate(parts)]
    return mark_safe("".join(html))  # noqa: S308 — every part is escaped above
