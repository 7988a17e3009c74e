"""Directory sign-in and the backends that check passwords.

People sign in with the site's directory: LDAP (django-auth-ldap) when ``GPUPORTAL_LDAP_URI`` is set, OpenID
Connect (mozilla-django-oidc, code flow with PKCE, endpoints from the issuer's discovery document) when
``GPUPORTAL_OIDC_ISSUER`` is set. Their groups become tenant memberships and platform roles through the mapping
platform admins edit on /directory/groups/ (or ``manage.py map_group``); directory/ holds the rules. Secrets come
from files, never from the environment itself. Local accounts (the demo's) keep signing in unless
``GPUPORTAL_LOCAL_LOGIN=0``, which leaves a local password only to platform admins (break-glass)."""

from gpuportal.settings.environment import env_bool, env_file, env_float, env_str, misconfigured

_LDAP_URI = env_str("GPUPORTAL_LDAP_URI")
_OIDC_ISSUER = env_str("GPUPORTAL_OIDC_ISSUER").rstrip("/")
DIRECTORY = {
    # Off: only platform admins (and superusers) may sign in with a local password.
    "LOCAL_LOGIN": env_bool("GPUPORTAL_LOCAL_LOGIN", True),
    # How often the beat brings every LDAP-signed-in person's memberships in line with the directory.
    "SYNC_INTERVAL_SECONDS": env_float("GPUPORTAL_DIRECTORY_SYNC_INTERVAL", 900),
    "LDAP": {
        "URI": _LDAP_URI,  # ldap://host:389 (with GPUPORTAL_LDAP_START_TLS=1) or ldaps://host:636
        "BIND_DN": env_str("GPUPORTAL_LDAP_BIND_DN"),
        "BIND_PASSWORD": env_file("GPUPORTAL_LDAP_BIND_PASSWORD_FILE"),
        "USER_BASE": env_str("GPUPORTAL_LDAP_USER_BASE"),
        "USER_FILTER": env_str("GPUPORTAL_LDAP_USER_FILTER", "(uid=%(user)s)"),
        "GROUP_BASE": env_str("GPUPORTAL_LDAP_GROUP_BASE"),
        "GROUP_FILTER": env_str("GPUPORTAL_LDAP_GROUP_FILTER", "(objectClass=groupOfNames)"),
        # People under the user base who match this filter are disabled (e.g. "(pwdAccountLockedTime=*)" with
        # OpenLDAP's ppolicy, "(userAccountControl:1.2.840.113556.1.4.803:=2)" on Active Directory).
        "DISABLED_FILTER": env_str("GPUPORTAL_LDAP_DISABLED_FILTER"),
        "CA_FILE": env_str("GPUPORTAL_LDAP_CA_FILE"),
        "START_TLS": env_bool("GPUPORTAL_LDAP_START_TLS", False),
        "TIMEOUT_SECONDS": env_float("GPUPORTAL_LDAP_TIMEOUT", 5),
    } if _LDAP_URI else None,
    "OIDC": {
        "ISSUER": _OIDC_ISSUER,
        "CLIENT_ID": env_str("GPUPORTAL_OIDC_CLIENT_ID"),
        "CLIENT_SECRET": env_file("GPUPORTAL_OIDC_CLIENT_SECRET_FILE"),
        "GROUPS_CLAIM": env_str("GPUPORTAL_OIDC_GROUPS_CLAIM", "groups"),
        "SCOPES": env_str("GPUPORTAL_OIDC_SCOPES", "openid email profile"),
        "PROVIDER_NAME": env_str("GPUPORTAL_OIDC_PROVIDER_NAME", "OpenID Connect"),
        "CA_FILE": env_str("GPUPORTAL_OIDC_CA_FILE"),
        "TIMEOUT_SECONDS": env_float("GPUPORTAL_OIDC_TIMEOUT", 10),
    } if _OIDC_ISSUER else None,
}
if DIRECTORY["LDAP"] and not DIRECTORY["LDAP"]["USER_BASE"]:
    raise misconfigured("GPUPORTAL_LDAP_USER_BASE", "be set with GPUPORTAL_LDAP_URI")
if DIRECTORY["OIDC"] and not DIRECTORY["OIDC"]["CLIENT_ID"]:
    raise misconfigured("GPUPORTAL_OIDC_CLIENT_ID", "be set with GPUPORTAL_OIDC_ISSUER")

AUTHENTICATION_BACKENDS = [
    "accounts.lockout.LockoutBackend",  # the lockout check (security.py) comes first
    *(["directory.ldap.auth.LDAPDirectoryBackend"] if DIRECTORY["LDAP"] else []),
    *(["directory.oidc.auth.OIDCDirectoryBackend"] if DIRECTORY["OIDC"] else []),
    "django.contrib.auth.backends.ModelBackend" if DIRECTORY["LOCAL_LOGIN"] else "directory.local.BreakGlassBackend",
]
