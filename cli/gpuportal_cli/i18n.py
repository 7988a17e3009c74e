"""Translation of what the client prints: the standard library's gettext, domain ``gpuportal_cli``.

A catalogue goes to ``gpuportal_cli/locale/<lang>/LC_MESSAGES/gpuportal_cli.mo``; without one the English
text is used, so a missing catalogue never stops the client."""

import gettext
from pathlib import Path

_translation = gettext.translation("gpuportal_cli", localedir=Path(__file__).parent / "locale", fallback=True)
gettext_ = _translation.gettext
ngettext = _translation.ngettext


def accept_language() -> str:
    """The ``Accept-Language`` to send, so that the server's messages (errors, wait reasons) come in the
    language the client prints: its catalogue's language, else English."""
    language = (_translation.info().get("language") or "").replace("_", "-").lower()
    if language.startswith("zh"):
        return "zh-Hans, zh;q=0.9, en;q=0.5"
    return f"{language}, en;q=0.5" if language and language != "en" else "en"
