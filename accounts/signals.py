"""Revoke a user's API tokens when the password changes, from wherever it changes (page, admin, command).

Signing out does not revoke tokens: they are credentials of their own (scripts, CI), independent of the
browser session, and each can be revoked by itself."""

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password, get_hasher, identify_hasher
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from accounts import tokens
from accounts.models import RevocationReason

User = get_user_model()


@receiver(pre_save, sender=User, dispatch_uid="accounts.password_change_seen")
def _notice_password_change(sender, instance, update_fields=None, raw=False, **kwargs):
    """Mark the user when its stored password hash changes to a different password.

    A re-hash of the same password is not a change: the new raw password, which ``set_password`` keeps until
    the save, still matches the old hash; and the upgrade Django makes at sign-in (an older hasher, or other
    parameters) saves the password field alone, with the raw password already forgotten."""
    instance._accounts_password_changed = False
    if raw or instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    old = User.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if old is None or old == instance.password:
        return
    new_raw = getattr(instance, "_password", None)
    if new_raw is not None and old and check_password(new_raw, old):
        return
    if new_raw is None and update_fields is not None and set(update_fields) == {"password"} and _due_for_rehash(old):
        return  # Django's upgrade at sign-in: it forgets the raw password before saving only the new hash
    instance._accounts_password_changed = True


def _due_for_rehash(encoded: str) -> bool:
    """Whether ``encoded`` is a hash that sign-in rewrites (an older hasher, or other parameters)."""
    try:
        hasher = identify_hasher(encoded)
    except ValueError:
        return False
    preferred = get_hasher()
    return hasher.algorithm != preferred.algorithm or preferred.must_update(encoded)


@receiver(post_save, sender=User, dispatch_uid="accounts.revoke_on_password_change")
def _revoke_on_password_change(sender, instance, **kwargs):
    if getattr(instance, "_accounts_password_changed", False):
        instance._accounts_password_changed = False
        tokens.revoke_all(instance, RevocationReason.PASSWORD_CHANGED)
