from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from directory import groups
from directory.models import GroupMapping
from tenants.models import PlatformRole, Role


class Command(BaseCommand):
    help = ("Map a directory group (an LDAP group's DN, or a value of the OpenID Connect groups claim) to a role in a "
            "tenant (--tenant NAME --role ROLE) or to a platform role (--platform-role ROLE). People get it at their "
            "next sign-in or the next sync_directory. --remove takes the mapping away again; --list shows them all.")

    def add_arguments(self, parser):
        parser.add_argument("group", nargs="?", help="The group's DN or claim value.")
        parser.add_argument("--tenant", default="", help="The tenant's name.")
        parser.add_argument("--role", default="", help=f"The role in the tenant: {', '.join(Role.values)}.")
        parser.add_argument("--platform-role", default="",
                            help=f"A platform role instead: {', '.join(PlatformRole.Kind.values)}.")
        parser.add_argument("--remove", action="store_true", help="Remove this mapping instead of adding it.")
        parser.add_argument("--list", action="store_true", help="List every mapping.")

    def handle(self, *args, group=None, tenant="", role="", platform_role="", remove=False, **options):
        if options["list"]:
            for mapping in GroupMapping.objects.select_related("tenant"):
                self.stdout.write(str(mapping))
            return
        if not group:
            raise CommandError("Give the group (its DN, or the claim value).")
        if remove:
            self._remove(group, tenant, role, platform_role)
            return
        try:
            mapping = groups.add_mapping(group, tenant=tenant, role=role, platform_role=platform_role)
        except ValidationError as error:
            raise CommandError(" ".join(f"{field}: {' '.join(messages)}"
                                        for field, messages in error.message_dict.items())) from error
        self.stdout.write(f"Mapped {mapping}.")

    def _remove(self, group, tenant, role, platform_role):
        mappings = GroupMapping.objects.filter(group_key=groups.normalize_group(group))
        if platform_role:
            mappings = mappings.filter(tenant__isnull=True, platform_role=platform_role)
        else:
            mappings = mappings.filter(tenant__name=tenant, role=role)
        found = list(mappings.select_related("tenant"))
        if not found:
            raise CommandError(f"There is no such mapping of {group}.")
        for mapping in found:
            groups.remove_mapping(mapping)
            self.stdout.write(f"Removed {mapping}.")
