"""The review pack's file formats: which renderer makes each, its content type and its file name.

One table for the download view and ``manage.py review_pack`` so both accept the same formats and name the
files alike.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from metering.review.contract import ReviewDocument
from metering.review.render.pdf import render_pdf
from metering.review.render.xlsx import render_xlsx


@dataclass(frozen=True)
class PackFormat:
    render: Callable[[ReviewDocument], bytes]
    content_type: str


FORMATS = {
    "pdf": PackFormat(render_pdf, "application/pdf"),
    "xlsx": PackFormat(render_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
}


def filename(review: ReviewDocument, fmt: str) -> str:
    """``gpuportal-review-2026-10-platform.pdf`` or ``gpuportal-review-2026-10-vision.xlsx``."""
    return f"gpuportal-review-{review.month}-{review.tenant or 'platform'}.{fmt}"


def render(review: ReviewDocument, fmt: str) -> bytes:
    """The review document as a file of ``fmt`` (a key of ``FORMATS``; KeyError otherwise)."""
    return FORMATS[fmt].render(review)


def pdf_pages(path: str) -> int | None:
    """Pages of a PDF file as poppler's ``pdfinfo`` counts them; None when pdfinfo is not installed or fails
    (the count is a courtesy of the command's message, never a reason to fail it)."""
    pdfinfo = shutil.which("pdfinfo")
    if pdfinfo is None:
        return None
    try:
        result = subprocess.run([pdfinfo, path], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in result.stdout.splitlines():
        if line.startswith("Pages:"):
            return int(line.split(":", 1)[1])
    return None
