"""``gpuportal``'s command line: the parser and ``main(argv)``, which returns the exit code (``errors.ExitCode``)
instead of exiting, so tests and other programs can call it in-process."""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__, commands
from .errors import CliError, ExitCode
from .i18n import gettext_ as _

DEFAULT_TIMEOUT = 30.0

EPILOG = _("Exit codes: 0 ok, 1 refused by the portal (invalid input: the field is named), 2 usage, "
           "3 not logged in or token refused, 4 not found, 5 portal unreachable or not a GPU Portal URL. "
           "GPUPORTAL_URL and GPUPORTAL_TOKEN override the saved settings.")


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """``--json``, ``--url`` and ``--timeout``, accepted before and after the command. On the commands they
    default to SUPPRESS so that an option given before the command is not overwritten."""
    parent = argparse.ArgumentParser(add_help=False)
    unset = argparse.SUPPRESS
    parent.add_argument("--json", action="store_true", default=False if defaults else unset,
                        help=_("print the API's JSON (errors too, as {\"error\": …}) for scripts"))
    parent.add_argument("--url", default=None if defaults else unset,
                        help=_("the portal's address, e.g. https://gpus.example.org (default: GPUPORTAL_URL, "
                               "then the saved login)"))
    parent.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT if defaults else unset,
                        # the number itself: on the commands the default is SUPPRESS, which has no value to show
                        help=_("seconds to wait for the portal (default %(seconds)s)").replace(
                            "%(seconds)s", str(DEFAULT_TIMEOUT)))
    return parent


def _positive(text: str) -> int:
    """A whole number of at least 1, for counts the client itself uses (``--limit``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(_("%(value)r is not a whole number of at least 1") % {"value": text})
    return value


def _job_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", type=int, help=_("job id"))


def _add_jobs_commands(sub, common) -> None:
    submit = sub.add_parser("submit", parents=[common], help=_("submit a job (flags or a YAML job file)"),
                            description=_("Submit a job. Flags override the fields of --file."))
    submit.add_argument("-f", "--file", help=_("YAML job file of submit fields (- for standard input)"))
    submit.add_argument("--batch", metavar="FILE",
                        help=_("a YAML list of jobs submitted in one call, all or none (up to 1000; - for standard "
                               "input)"))
    submit.add_argument("--sbatch", metavar="SCRIPT",
                        help=_("a Slurm batch script: its #SBATCH directives fill the fields not given otherwise, "
                               "its body is the command (- for standard input)"))
    for name, kind, text in commands.SUBMIT_OPTIONS:
        submit.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, help=text)
    submit.add_argument("--requeue-on-preemption", action=argparse.BooleanOptionalAction, default=None,
                        help=_("requeue the job when it is preempted (default yes)"))
    submit.add_argument("--idempotency-key", help=_("retrying with the same key never submits twice"))
    submit.add_argument("--template", help=_("start from this template (its name or id; `gpuportal templates` "
                                             "lists them); flags override its fields"))
    submit.add_argument("--param", action="append", metavar="NAME=VALUE",
                        help=_("a template parameter (repeat for several), e.g. --param epochs=20"))
    submit.set_defaults(handler=commands.submit)

    sub.add_parser("templates", parents=[common], help=_("job templates you may start from")).set_defaults(
        handler=commands.templates)
    clone = sub.add_parser("clone", parents=[common], help=_("submit a job's request again (an array or service: "
                                                             "the whole of it)"))
    _job_id(clone)
    clone.set_defaults(handler=commands.clone)

    jobs = sub.add_parser("jobs", parents=[common], help=_("list jobs, with the filters of the job page"))
    jobs.add_argument("--status", action="append", help=_("status (repeat for several): pending, queued, admitted, "
                                                          "dispatching, running, succeeded, failed, cancelled, "
                                                          "preempted"))
    for option, text in (("task-type", _("task type code")), ("gpu-model", _("GPU model")),
                         ("tenant", _("tenant name")), ("project", _("project name")), ("owner", _("username"))):
        jobs.add_argument("--" + option, help=text)
    jobs.add_argument("--mine", action="store_true", help=_("only my jobs"))
    jobs.add_argument("-q", "--search", help=_("text in the name or image, or a job id"))
    jobs.add_argument("--sort", help=_(
        "order by a column of the job page (name, status, submitted, start, end, elapsed, wait, exit_code, gpus, "
        "model, node, efficiency, …); --sort=-column for descending; newest first when left out"))
    jobs.add_argument("--limit", type=_positive, default=50, help=_("at most this many jobs (default %(default)s)"))
    jobs.set_defaults(handler=commands.jobs)

    for name, handler, text in (("show", commands.show, _("a job's details, explanation and timeline")),
                                ("why", commands.why, _("why a job waits (reason, position, estimated start) or "
                                                        "how it failed (category, evidence)")),
                                ("hold", commands.hold, _("hold a waiting job: it will not start until released")),
                                ("release", commands.release, _("release a held job")),
                                ("efficiency", commands.efficiency, _("how a job used the GPUs it held: GPU-hours, "
                                                                      "utilisation, memory, idle time"))):
        command = sub.add_parser(name, parents=[common], help=text)
        _job_id(command)
        command.set_defaults(handler=handler)

    opener = sub.add_parser("open", parents=[common], help=_("open a running job's named port (TensorBoard, a web "
                                                              "UI) through the portal in the web browser"))
    _job_id(opener)
    opener.add_argument("port", help=_("the port's name, e.g. tensorboard"))
    opener.add_argument("--print", action="store_true", help=_("only print its address"))
    opener.set_defaults(handler=commands.open_port)

    cancel = sub.add_parser("cancel", parents=[common], help=_("cancel a job"))
    _job_id(cancel)
    cancel.add_argument("--reason", help=_("why (shown on the job's timeline)"))
    cancel.set_defaults(handler=commands.cancel)

    logs = sub.add_parser("logs", parents=[common], help=_("the last lines of a job's log"))
    _job_id(logs)
    logs.add_argument("--tail", type=int, help=_("lines (default: the portal's, 200)"))
    logs.add_argument("-f", "--follow", action="store_true", help=_("keep printing new lines until the job ends"))
    logs.add_argument("--interval", type=float, default=2.0, help=_("seconds between polls with --follow"))
    logs.set_defaults(handler=commands.logs)


def _add_requests_commands(sub, common) -> None:
    requests = sub.add_parser("requests", parents=[common], help=_("requests for exceptions: list, ask, approve, "
                                                                   "deny"))
    requests.set_defaults(handler=commands.requests_list, state=None, kind=None)
    actions = requests.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help=_("requests you may see (default)"))
    listing.add_argument("--state", help=_("pending, approved, denied or expired"))
    listing.add_argument("--kind", help=_("priority, burst, reservation, runtime_extension, quota or admission"))
    listing.set_defaults(handler=commands.requests_list)
    show = actions.add_parser("show", parents=[common], help=_("one request with its impact and decision"))
    show.add_argument("request", type=int, help=_("request id"))
    show.set_defaults(handler=commands.requests_show)

    ask = actions.add_parser("ask", parents=[common], help=_("ask for an exception"))
    ask.add_argument("--kind", required=True, choices=["priority", "burst", "reservation", "runtime_extension",
                                                       "quota"])
    ask.add_argument("--justification", required=True, help=_("why; the approver reads it"))
    for name, kind in commands.REQUEST_OPTIONS:
        ask.add_argument("--" + name.replace("_", "-"), dest=name, type=kind)
    ask.add_argument("--idempotency-key", help=_("retrying with the same key never asks twice"))
    ask.set_defaults(handler=commands.requests_ask)

    for name, handler in (("approve", commands.requests_approve), ("deny", commands.requests_deny)):
        decide = actions.add_parser(name, parents=[common], help=_("%(action)s a request (approvers)")
                                    % {"action": name})
        decide.add_argument("request", type=int, help=_("request id"))
        decide.add_argument("--comment", help=_("what the requester will read"))
        decide.set_defaults(handler=handler)


def _add_workload_commands(sub, common) -> None:
    """``service show|scale|rollout|stop ID`` and ``array show|cancel ID``."""
    service = sub.add_parser("service", parents=[common], help=_("an inference service: show, scale, rollout, stop"))
    actions = service.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (("show", commands.service_show, _("the service, its replicas and endpoint")),
                                ("scale", commands.service_scale, _("set how many replicas serve")),
                                ("rollout", commands.service_rollout, _("replace the replicas, one at a time, with "
                                                                        "a new image")),
                                ("stop", commands.service_stop, _("stop every replica"))):
        command = actions.add_parser(name, parents=[common], help=text)
        command.add_argument("group", type=int, help=_("service id"))
        if name == "scale":
            command.add_argument("replicas", type=_positive, help=_("the number of replicas"))
        if name == "rollout":
            command.add_argument("image", help=_("the new image, e.g. registry.local/vllm:0.7"))
        command.set_defaults(handler=handler)

    array = sub.add_parser("array", parents=[common], help=_("a job array: show, cancel"))
    actions = array.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (("show", commands.array_show, _("the array and its tasks")),
                                ("cancel", commands.array_cancel, _("cancel every task that has not ended"))):
        command = actions.add_parser(name, parents=[common], help=text)
        command.add_argument("group", type=int, help=_("array id"))
        command.set_defaults(handler=handler)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuportal", parents=[_common_options(defaults=True)], epilog=EPILOG,
                                     description=_("GPU Portal from the command line: submit jobs, see why they "
                                                   "wait, follow their logs, ask for exceptions."))
    parser.add_argument("--version", action="version", version=f"gpuportal-cli {__version__}")
    common = _common_options(defaults=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    login = sub.add_parser("login", parents=[common], help=_("log in and save an API token (file mode 0600)"))
    login.add_argument("-u", "--username", help=_("default: the last one, else asked"))
    login.add_argument("--password-stdin", action="store_true", help=_("read the password from standard input"))
    login.add_argument("--token-name", help=_("the token's name on the portal's token page"))
    login.add_argument("--days", type=int, help=_("days the token is valid (default: the portal's)"))
    login.set_defaults(handler=commands.login)
    sub.add_parser("logout", parents=[common], help=_("revoke and forget the saved token")).set_defaults(
        handler=commands.logout)

    _add_jobs_commands(sub, common)
    sub.add_parser("quota", parents=[common], help=_("your tenants' quotas and use per GPU model")).set_defaults(
        handler=commands.quota)
    queue = sub.add_parser("queue", parents=[common], help=_("the waiting jobs in the order they are considered"))
    queue.add_argument("--cluster", help=_("cluster name"))
    queue.set_defaults(handler=commands.queue)
    _add_requests_commands(sub, common)
    _add_workload_commands(sub, common)
    report = sub.add_parser("report", parents=[common], help=_("a monthly usage report"))
    report.add_argument("--month", help=_("YYYY-MM (default: this month)"))
    report.add_argument("--tenant", help=_("a tenant of yours (default: the platform report, for managers)"))
    report.set_defaults(handler=commands.report)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code is returned (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a usage error (2, argparse printed it)
        return stop.code if isinstance(stop.code, int) else ExitCode.USAGE
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    context = commands.Context(args)
    try:
        return int(args.handler(context))
    except CliError as error:
        return int(context.fail(error))
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `gpuportal jobs | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
