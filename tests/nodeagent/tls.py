"""A self-signed certificate for 127.0.0.1, made by the ``openssl`` command (``cryptography`` is not a
dependency of the project)."""

import shutil
import subprocess

import pytest


def self_signed_cert(directory) -> tuple[str, str]:
    """Write ``cert.pem`` and ``key.pem`` (EC P-256, SAN IP:127.0.0.1) under ``directory``; return their paths."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.fail("the openssl command is needed to make a test certificate")
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=30)
    return cert, key
