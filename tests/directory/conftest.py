"""The directory tests' servers, one of each per test module (starting them is most of the modules' time), and
the settings that point the portal at them."""

import pytest

from directory.oidc.auth import forget_discovery
from tests.directory.servers import OIDCProvider, Slapd

LDAP_BACKENDS = ["accounts.lockout.LockoutBackend", "directory.ldap.auth.LDAPDirectoryBackend",
                 "django.contrib.auth.backends.ModelBackend"]
OIDC_BACKENDS = ["accounts.lockout.LockoutBackend", "directory.oidc.auth.OIDCDirectoryBackend",
                 "django.contrib.auth.backends.ModelBackend"]


@pytest.fixture(scope="module")
def slapd():
    server = Slapd().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oidc_provider():
    provider = OIDCProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def ldap_sign_in(slapd, settings):
    """The portal signs people in with the module's slapd (as GPUPORTAL_LDAP_* would configure it)."""
    settings.DIRECTORY = {**settings.DIRECTORY, "LDAP": slapd.settings(), "OIDC": None, "LOCAL_LOGIN": True}
    settings.AUTHENTICATION_BACKENDS = LDAP_BACKENDS
    return slapd


@pytest.fixture
def oidc_sign_in(oidc_provider, settings):
    """The portal signs people in with the module's OpenID Connect provider."""
    forget_discovery()
    settings.DIRECTORY = {**settings.DIRECTORY, "LDAP": None, "OIDC": oidc_provider.settings(), "LOCAL_LOGIN": True}
    settings.AUTHENTICATION_BACKENDS = OIDC_BACKENDS
    yield oidc_provider
    forget_discovery()
