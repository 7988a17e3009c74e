from . import access


def roles(request):
    """What the navigation needs to know about the signed-in user."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    info = access.for_user(user)
    return {"portal_access": info, "portal_is_tenant_admin": bool(access.admin_tenant_ids(user))}
