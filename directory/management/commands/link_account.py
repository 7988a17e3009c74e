"""``manage.py link_account USERNAME --source ldap|oidc --identifier ID [--issuer URL]``: a platform admin says
which directory identity an existing account is.

A directory sign-in never adopts an existing account by its name (``directory.sync.link_account``): when the
portal already has ``ada`` and the directory's ``ada`` signs in, she is refused until an admin, who knows they
are the same person, links them here. The link is audited (``directory.link``, before and after).

Superusers are refused, with no option to force it: a superuser passes every permission check, and linking
one would hand it to whoever controls the directory entry (its administrators, a reused name, a stolen
directory password); a superuser is also the way in when the directory is down or wrong, so it keeps its
local password only. Give a directory person platform-wide rights through a group mapping instead (audited).
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from directory.groups import normalize_dn
from directory.models import AccountSource
from directory.oidc.auth import oidc_conf
from directory.sync import LinkRefused, link_identity


class Command(BaseCommand):
    help = ("Link an existing account to a directory identity: an LDAP DN (--source ldap) or an OpenID Connect "
            "subject (--source oidc, of --issuer or the configured issuer). Its directory sign-ins then land in "
            "this account. Refused for superusers and for an identity another account holds.")

    def add_arguments(self, parser):
        parser.add_argument("username", help="The portal account.")
        parser.add_argument("--source", required=True, choices=AccountSource.values)
        parser.add_argument("--identifier", required=True,
                            help="The person's DN (ldap) or the issuer's subject, the sub claim (oidc).")
        parser.add_argument("--issuer", default="", help="OpenID Connect only: the issuer (default: the configured "
                                                         "GPUPORTAL_OIDC_ISSUER).")

    def handle(self, *args, username, source, identifier, issuer, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(_("No user named %(user)r.") % {"user": username})
        identifier = identifier.strip()
        if not identifier:
            raise CommandError(_("Give the identifier: the DN (ldap) or the subject (oidc)."))
        if source == AccountSource.LDAP:
            if issuer:
                raise CommandError(_("--issuer is for OpenID Connect only; an LDAP identity is its DN."))
            identifier = normalize_dn(identifier)  # as sign-in and the sync compare DNs
        else:
            issuer = (issuer or (oidc_conf() or {}).get("ISSUER", "")).strip().rstrip("/")
            if not issuer:
                raise CommandError(_("Give --issuer: OpenID Connect sign-in is not configured here."))
        try:
            account = link_identity(user, source, identifier, issuer)
        except LinkRefused as refusal:
            raise CommandError(_("Not linked: %(reason)s (%(user)s).") % {
                "reason": _(refusal.reason), "user": refusal.username}) from refusal
        self.stdout.write(_("Linked %(user)s to %(source)s %(identifier)s%(issuer)s.") % {
            "user": user.get_username(), "source": account.get_source_display(), "identifier": account.identifier,
            "issuer": f" ({account.issuer})" if account.issuer else ""})
