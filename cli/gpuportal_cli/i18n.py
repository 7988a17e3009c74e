"""Translation of what the client prints: the standard library's gettext, domain ``gpuportal_cli``.

A catalogue goes to ``gpuportal_cli/locale/<lang>/LC_MESSAGES/gpuportal_cli.mo``; without one the English
text is used, so a missing catalogue never stops the client."""

import gettext
from pathlib import Path

_translation = gettext.translation("gpuportal_cli", localedir=Path(__file__).parent / "locale", fallback=True)
gettext_ = _translation.gettext
ngettext = _translation.ngettext
