"""Settings of the tests' OpenID Connect provider (``serve.py``): django-oauth-toolkit with OpenID Connect on,
an RSA signing key generated when the process starts, PKCE required, RP-initiated logout on.

Everything lives in the state directory the tests give (``PROVIDER_STATE``): the SQLite database and the
setup (client, people, groups). Nothing here is part of the portal."""

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

STATE = Path(os.environ["PROVIDER_STATE"])
PORT = int(os.environ["PROVIDER_PORT"])

SECRET_KEY = secrets.token_urlsafe(50)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "oauth2_provider"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.directory.oidc_provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [Path(__file__).parent / "templates"], "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE / "provider.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast: a test provider
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# The portal and the provider both run on 127.0.0.1: a cookie name of its own keeps the sessions apart.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"

_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": f"http://127.0.0.1:{PORT}/o",
    "OIDC_RSA_PRIVATE_KEY": _KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()).decode(),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "email": "E-mail address", "profile": "Name", "groups": "Groups"},
    "OAUTH2_VALIDATOR_CLASS": "tests.directory.oidc_provider.validator.GroupsValidator",
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    # The browser test's portal runs on http://localhost:<any port> (RFC 8252 loopback redirects).
    "ALLOW_LOCALHOST_LOOPBACK": True,
}
