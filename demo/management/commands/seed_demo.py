from django.core.management.base import BaseCommand

from demo.world import DEMO_PASSWORD, USERS, seed_demo
from scheduling.executors.simulated import serving as simulated_serving


class Command(BaseCommand):
    help = "Create the simulated demo cluster, tenants, users (password 'demo') and a mix of jobs."

    def add_arguments(self, parser):
        parser.add_argument("--no-history", action="store_true", help="Skip the finished jobs of past weeks.")

    def handle(self, *args, no_history=False, **options):
        simulated_serving.stop_all()  # notebook and service stand-ins of an earlier demo serve nothing now
        world = seed_demo(history=not no_history)
        self.stdout.write(self.style.SUCCESS(
            f"Demo ready: {len(world['tenants'])} tenants, {len(world.get('live', []))} live jobs, "
            f"{world.get('history', 0)} finished jobs."))
        self.stdout.write(f"Logins (password '{DEMO_PASSWORD}'):")
        for username, tenant, roles in USERS:
            self.stdout.write(f"  {username:<6} {', '.join(str(r) for r in roles)}{f' @ {tenant}' if tenant else ''}")
