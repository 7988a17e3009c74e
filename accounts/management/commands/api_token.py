"""``manage.py api_token create|list|revoke``: API tokens from the command line (for admins and automation).

The secret of a created token is printed once, on its own line, so that a script can capture it."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from accounts import tokens
from accounts.models import ApiToken, RevocationReason


class Command(BaseCommand):
    help = "Create, list or revoke a user's API tokens."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token and print its secret once.")
        create.add_argument("--user", required=True)
        create.add_argument("--name", required=True)
        create.add_argument("--days", type=int, default=None, help="Lifetime in days (default: API_TOKENS).")
        listing = sub.add_parser("list", help="List a user's tokens (never their secrets).")
        listing.add_argument("--user", required=True)
        revoke = sub.add_parser("revoke", help="Revoke one token (--id or --prefix) or all (--all).")
        revoke.add_argument("--user", required=True)
        which = revoke.add_mutually_exclusive_group(required=True)
        which.add_argument("--id", type=int)
        which.add_argument("--prefix")
        which.add_argument("--all", action="store_true")

    def handle(self, *args, action, user, **options):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(_("No user named %(user)r.") % {"user": user})
        getattr(self, f"_{action}")(account, options)

    def _create(self, user, options):
        try:
            token, secret = tokens.issue(user, options["name"], options["days"])
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stderr.write(_("Token %(name)r (id %(id)d) expires %(when)s UTC; the secret is shown only now:") % {
            "name": token.name, "id": token.id, "when": f"{token.expires_at:%Y-%m-%d %H:%M}"})
        self.stdout.write(secret)

    def _list(self, user, options):
        for t in ApiToken.objects.filter(user=user):
            used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else _("never")
            self.stdout.write("\t".join([str(t.id), f"{t.prefix}…", t.name, t.state,
                                         _("expires %(d)s") % {"d": f"{t.expires_at:%Y-%m-%d}"},
                                         _("last used %(d)s") % {"d": used}]))

    def _revoke(self, user, options):
        if options["all"]:
            count = tokens.revoke_all(user, RevocationReason.ADMIN)
            self.stdout.write(_("Revoked %(n)d token(s).") % {"n": count})
            return
        found = ApiToken.objects.filter(user=user)
        found = found.filter(pk=options["id"]) if options["id"] else found.filter(prefix=options["prefix"])
        token = found.first()
        if token is None:
            raise CommandError(_("No such token for this user."))
        tokens.revoke(token, RevocationReason.ADMIN)
        self.stdout.write(_("Revoked %(name)r (id %(id)d).") % {"name": token.name, "id": token.id})
