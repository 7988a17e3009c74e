"""Sign-in, API tokens, client addresses and the response headers every profile sends (OWASP ASVS level 2).

The production-only hardening (HTTPS redirect, HSTS, secure cookies, the refusals of a weak key or DEBUG) is in
production.py, beside the values it guards."""

from gpuportal.settings.environment import env_float, env_int, env_networks

# Password rules in every profile: the demo's and the tests' fixed users get "demo" through set_password, which
# does not validate.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": env_int("GPUPORTAL_PASSWORD_MIN_LENGTH", 12)}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# New passwords are stored as Argon2id at OWASP's parameters (accounts/hashers.py: why, and the figures); the
# hashers after it only read hashes stored before, which are rewritten as Argon2id at the next sign-in. Bound as
# PASSWORD_HASHERS by the demo's and production's profiles; the tests' hashes MD5, for speed (test.py).
PORTAL_PASSWORD_HASHERS = [
    "accounts.hashers.OwaspArgon2idHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
# Failed sign-ins (login page, admin, POST /api/auth/token/) are counted per username and address together;
# after AXES_FAILURE_LIMIT of them that pair is refused, even with the right password, for the cool-off. The
# backends that check passwords are the directory's (directory.py).
AXES_FAILURE_LIMIT = env_int("GPUPORTAL_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("GPUPORTAL_LOGIN_LOCKOUT_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The address of that pair by the trusted-proxy rule (gpuportal.web.clients), not the proxy's own address: behind
# an ingress, five bad passwords from anywhere would otherwise lock the account for everyone.
AXES_CLIENT_IP_CALLABLE = "gpuportal.web.clients.request_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_VERBOSE = False
# API tokens: lifetime in days when none is asked for, and the longest allowed.
API_TOKENS = {
    "DEFAULT_DAYS": env_int("GPUPORTAL_API_TOKEN_DAYS", 90),
    "MAX_DAYS": env_int("GPUPORTAL_API_TOKEN_MAX_DAYS", 365),
    "LAST_USED_RESOLUTION_SECONDS": 60,
}
# A refused CSRF check: the 403 page in the site's layout, saying to reload and send again.
CSRF_FAILURE_VIEW = "gpuportal.views.csrf_failure"

# Reverse proxies (CIDRs) whose X-Forwarded-For is believed for the source address of audit records and sign-in
# lockouts; from any other peer the header is ignored and REMOTE_ADDR is recorded.
TRUSTED_PROXIES = env_networks("GPUPORTAL_TRUSTED_PROXIES")

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy, sent in every profile (gpuportal.web.csp.ContentSecurityPolicyMiddleware): scripts only
# from the site's own files (charts read their figures from <script type="application/json"> blocks, which
# are never executed); styles may be inline because plotly.js and Swagger UI set them.
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "frame-ancestors": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
}

#: The embedded demo's and the tests' key when SECRET_KEY is not set; production refuses it by name.
EMBEDDED_SECRET_KEY = "embedded-demo-key-not-for-production"
