"""Start the tests' OpenID Connect provider: ``python serve.py PORT STATE_DIR`` (``tests/directory/servers.py``).

Creates its SQLite database, the people and groups of ``STATE_DIR/setup.json`` and the portal's client
(confidential, authorization code, RS256, consent skipped), then serves on 127.0.0.1:PORT until terminated."""

import json
import os
import sys
from pathlib import Path


def main() -> None:
    port, state = int(sys.argv[1]), Path(sys.argv[2])
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository, for tests.directory...
    os.environ.update({"DJANGO_SETTINGS_MODULE": "tests.directory.oidc_provider.settings", "PROVIDER_PORT": str(port),
                       "PROVIDER_STATE": str(state)})
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    setup = json.loads((state / "setup.json").read_text())
    for person in setup["users"]:
        user = User.objects.create_user(person["username"], person["email"], person["password"],
                                        first_name=person["username"].title(), last_name="Provider")
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in person["groups"]])
    Application.objects.create(
        name="gpuportal", client_id=setup["client_id"], client_secret=setup["client_secret"],
        client_type=Application.CLIENT_CONFIDENTIAL, authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(setup["redirect_uris"]),
        post_logout_redirect_uris=" ".join(setup["post_logout_redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM, skip_authorization=True)
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main()
