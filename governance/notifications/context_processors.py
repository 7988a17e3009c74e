from governance.notifications.services import unread_count


def notifications(request):
    """The unread count of the bell in the navigation."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"portal_unread": unread_count(user)}
