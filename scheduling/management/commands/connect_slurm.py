"""``manage.py connect_slurm NAME --url URL (--jwt-key-file PATH | --token-file PATH) …``: join a Slurm cluster.

Creates or updates the cluster (executor ``slurm``), reads its nodes at once and prints one JSON object: the
cluster, its nodes, GPUs, GPUs per model, the REST API version chosen and Slurm's version. Everything happens in
one transaction, so a cluster that cannot be read is not stored half-connected. Bad input fails naming the
option, without a traceback; neither the key nor a token is ever printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils.translation import gettext_noop

from audit import log as audit
from audit.models import AuditAction
from fleet.catalogue import accelerator_models
from fleet.models import Cluster, ExecutorKind, SlurmContainer
from gpuportal.text.phrases import Phrase
from scheduling.executors.slurm.client import SlurmError
from scheduling.executors.slurm.inventory import import_inventory
from scheduling.executors.slurm.tokens import token_user

#: The cluster's connection settings this command sets (and the audit record keeps, before and after).
SETTINGS = ("slurm_url", "slurm_jwt_key_file", "slurm_token_file", "slurm_user", "slurm_run_as", "slurm_models",
            "slurm_output_dir", "slurm_container")
#: The audit record's reason (a stored phrase: it reads in its reader's language).
CONNECTED = gettext_noop("Slurm connection set by connect_slurm: %(nodes)d nodes, %(gpus)d GPUs imported.")


class Command(BaseCommand):
    help = ("Connect a Slurm cluster through its slurmrestd (JWT): create or update the cluster, import its nodes and "
            "print what was found as JSON.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="The cluster's name in the portal (letters, digits, - and _).")
        parser.add_argument("--url", required=True, help="slurmrestd's address, e.g. http://slurm-head:6820.")
        parser.add_argument("--jwt-key-file", default="", help="The cluster's jwt_hs256.key: the portal signs a "
                            "short-lived token per user with it.")
        parser.add_argument("--token-file", default="", help="A token from 'scontrol token' (one account only).")
        parser.add_argument("--run-as", default="", help="Run every job as this account (default: each job as "
                            "its owner's account on the cluster).")
        parser.add_argument("--user", default="", help="The account the portal reads nodes, jobs and accounting "
                            "as (default: the token file's user, else the --run-as account, else 'slurm').")
        parser.add_argument("--model", action="append", default=[], metavar="TYPE=MODEL",
                            help="A GRES type to a catalogue model where the names differ beyond case (repeatable).")
        parser.add_argument("--output-dir", default="", help="Where jobs write their output, on a filesystem the "
                            "portal can read too (empty: no log access).")
        parser.add_argument("--container", default=SlurmContainer.NONE, choices=SlurmContainer.values,
                            help="How a job's image runs: none (the command runs on the node), apptainer or pyxis.")

    def handle(self, *args, **options):
        values = _settings(options)
        with transaction.atomic():
            cluster, before = _store(options["name"], values)
            try:
                report = import_inventory(cluster)
            except SlurmError as exc:
                raise CommandError(_slurm_problem(options, exc)) from None
            audit.record(AuditAction.CLUSTER_CHANGE, cluster, actor=None, before=before,
                         after={name: getattr(cluster, name) for name in SETTINGS},
                         reason=Phrase(CONNECTED, {"nodes": report.nodes, "gpus": report.gpus}))
        self.stdout.write(json.dumps(report.summary(), sort_keys=True))


def _settings(options) -> dict:
    """The cluster's settings from the options, each checked (a CommandError names the option at fault)."""
    try:
        validate_slug(options["name"])
    except ValidationError:
        raise CommandError(f"NAME: {options['name']!r} is not a valid cluster name (letters, digits, - and _).") \
            from None
    url = options["url"].strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CommandError(f"--url: give slurmrestd's address as http(s)://host:port, not {url!r}.")
    key_file, token_file = options["jwt_key_file"], options["token_file"]
    if bool(key_file) == bool(token_file):
        raise CommandError("--jwt-key-file / --token-file: give exactly one of them.")
    option, path = ("--jwt-key-file", key_file) if key_file else ("--token-file", token_file)
    try:
        if not Path(path).read_bytes().strip():
            raise CommandError(f"{option}: {path} is empty.")
    except OSError as exc:
        raise CommandError(f"{option}: cannot read {path} ({exc.strerror}).") from None
    path = str(Path(path).resolve())
    user = options["user"]
    if token_file:
        owner = token_user(Cluster(slurm_token_file=path))
        if not owner and not user:
            raise CommandError("--token-file: the token names no user; say whose it is with --user.")
        if owner and user and owner != user:
            raise CommandError(f"--user: the token file is for {owner}, not {user}.")
        user = user or owner
    return {"slurm_url": url.rstrip("/"), "slurm_jwt_key_file": path if key_file else "",
            "slurm_token_file": path if token_file else "", "slurm_user": user, "slurm_run_as": options["run_as"],
            "slurm_models": _models(options["model"]), "slurm_output_dir": options["output_dir"],
            "slurm_container": options["container"]}


def _models(pairs: list[str]) -> dict[str, str]:
    """``TYPE=MODEL`` pairs; each model must be one of the catalogue's (matched whatever its case)."""
    catalogue = {name.lower(): name for name in accelerator_models()}
    models = {}
    for pair in pairs:
        gres_type, sep, model = pair.partition("=")
        if not sep or not gres_type.strip() or not model.strip():
            raise CommandError(f"--model: give TYPE=MODEL, e.g. h100=H100, not {pair!r}.")
        known = catalogue.get(model.strip().lower())
        if known is None:
            raise CommandError(f"--model: {model.strip()!r} is not a model of the catalogue (known: "
                               f"{', '.join(sorted(catalogue.values()))}).")
        models[gres_type.strip().lower()] = known
    return models


def _store(name: str, values: dict) -> tuple[Cluster, dict | None]:
    """Create the cluster or update its connection; the settings before (None for a new cluster)."""
    cluster = Cluster.objects.select_for_update().filter(name=name).first()
    if cluster is None:
        return Cluster.objects.create(name=name, executor=ExecutorKind.SLURM, **values), None
    if cluster.executor != ExecutorKind.SLURM and cluster.nodes.exists():
        raise CommandError(f"NAME: cluster {name} exists with the {cluster.executor} executor and has nodes; "
                           "choose another name.")
    before = {field: getattr(cluster, field) for field in SETTINGS}
    cluster.executor = ExecutorKind.SLURM
    for field, value in values.items():
        setattr(cluster, field, value)
    cluster.save()
    return cluster, before


def _slurm_problem(options, exc: SlurmError) -> str:
    """Which option to look at when slurmrestd could not be read (its message never holds a token)."""
    if exc.http_status == 0 and "did not answer" in str(exc):
        return f"--url: slurmrestd at {options['url']} could not be reached ({exc})."
    credential = "--jwt-key-file" if options["jwt_key_file"] else "--token-file"
    return f"{credential} / --user: slurmrestd refused the portal's requests ({exc})."
