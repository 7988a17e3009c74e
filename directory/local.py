"""Local passwords when the directory is the way in (``GPUPORTAL_LOCAL_LOGIN=0``): only platform admins keep
them, as a break-glass way in when the directory is down or misconfigured."""

from django.contrib.auth.backends import ModelBackend

from tenants import access


class BreakGlassBackend(ModelBackend):
    """Django's password check for platform admins (and superusers) only. Everyone else signs in through the
    directory; their existing sessions from a local sign-in end at the next request."""

    def user_can_authenticate(self, user):
        return super().user_can_authenticate(user) and access.is_platform_admin(user)
