"""What each ``gpuportal`` command does: one API call or a few, then either the API's JSON (``--json``) or
a human answer. Every handler takes the ``Context`` and returns an exit code."""

from __future__ import annotations

import getpass
import json
import os
import socket
import sys
import time
import webbrowser
from datetime import date
from pathlib import Path
from urllib.parse import quote

import yaml

from . import config, explain, render
from . import efficiency as efficiency_text
from .api import Portal
from .errors import CliError, ExitCode
from .i18n import gettext_ as _


class Context:
    """The parsed arguments, where output goes, and the portal to talk to."""

    def __init__(self, args):
        self.args = args
        self.json = bool(getattr(args, "json", False))

    def portal(self, login_required: bool = True) -> Portal:
        settings = config.resolve(self.args.url)
        portal = Portal(settings.url, settings.token, settings.token_source, timeout=self.args.timeout)
        if login_required and not settings.token:
            raise CliError(_("Not logged in to %(url)s: run `gpuportal login --url %(url)s` or set %(var)s.")
                           % {"url": settings.url, "var": config.TOKEN_VARIABLE}, ExitCode.AUTH)
        return portal

    def emit(self, data, human) -> int:
        """The API's JSON with ``--json``, else ``human(data)``."""
        if self.json:
            print(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            print(human(data))
        return ExitCode.OK

    def fail(self, error: CliError) -> int:
        print(f"gpuportal: {error.message}", file=sys.stderr)
        if self.json:
            print(json.dumps({"error": {"message": error.message, "exit_code": int(error.exit_code),
                                        "status": error.status, "detail": error.detail}}, ensure_ascii=False))
        return error.exit_code


# --- login, logout ---------------------------------------------------------------------------------------


def _password(args) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return getpass.getpass(_("Password for %(user)s: ") % {"user": args.username})


def login(ctx: Context) -> int:
    args, saved = ctx.args, config.load()
    url = args.url or os.environ.get(config.URL_VARIABLE) or saved.get("url")
    if not url:
        raise CliError(_("Which portal? Give --url (e.g. https://gpus.example.org)."), ExitCode.USAGE)
    url = config.normalise_url(url)
    args.username = args.username or saved.get("username") or input(_("Username: ")).strip()
    body = {"username": args.username, "password": _password(args),
            "name": args.token_name or _("gpuportal CLI on %(host)s") % {"host": socket.gethostname()}}
    if args.days:
        body["days"] = args.days
    try:
        answer = Portal(url, timeout=args.timeout).request("POST", "/api/auth/token/", body=body, authenticate=False)
    except CliError as error:
        if error.status == 400 and isinstance(error.detail, dict) and "non_field_errors" in error.detail:
            raise CliError(_("Login refused: %(why)s") % {"why": " ".join(error.detail["non_field_errors"])},
                           ExitCode.AUTH, error.status, error.detail) from None
        raise
    path = config.save({"url": url, "username": args.username, "token": answer["token"],
                        "token_id": answer.get("id"), "expires_at": answer.get("expires_at")})
    public = {**{k: v for k, v in answer.items() if k != "token"}, "url": url, "username": args.username,
              "config": str(path)}
    if os.environ.get(config.TOKEN_VARIABLE):
        print(_("Note: %(var)s is set and takes precedence over the saved token.") % {"var": config.TOKEN_VARIABLE},
              file=sys.stderr)
    return ctx.emit(public, lambda p: _(
        "Logged in to %(url)s as %(user)s. Token %(prefix)s… expires %(expires)s; saved in %(path)s (readable "
        "only by you).") % {"url": url, "user": args.username, "prefix": p.get("prefix", ""),
                            "expires": render.when(p.get("expires_at"), relative=False), "path": path})


def logout(ctx: Context) -> int:
    """Revoke the saved token on the portal, then forget it (the URL and username stay for the next login)."""
    saved = config.load()
    revoked = False
    if saved.get("token"):
        portal = Portal(saved["url"], saved["token"], "file", timeout=ctx.args.timeout)
        try:
            if saved.get("token_id") is not None:
                portal.post(f"/api/tokens/{saved['token_id']}/revoke/")
                revoked = True
        except CliError as error:  # an expired token or an unreachable portal: forgetting it is still right
            print(_("Warning: the token was not revoked on the portal: %(why)s") % {"why": error.message},
                  file=sys.stderr)
    config.save({k: v for k, v in saved.items() if k not in ("token", "token_id", "expires_at")})
    return ctx.emit({"revoked": revoked, "config": str(config.config_path())}, lambda _data: _(
        "Logged out: the token is revoked and removed from %(path)s.") % {"path": config.config_path()}
        if revoked else _("Logged out: no token is saved any more."))


# --- jobs ------------------------------------------------------------------------------------------------

#: ``submit``'s options: the fields of ``POST /api/jobs/`` (docs/api-and-cli.md), type and help.
SUBMIT_OPTIONS = (
    ("tenant", str, _("tenant name; optional when --project names it (tenant/project)")),
    ("project", str, _("project name, or tenant/project")),
    ("name", str, _("job name; one is made up if empty")),
    ("task_type", str, _("task type code: inference, training, research, notebook, evaluation, test")),
    ("gpu_model", str, _("GPU model, e.g. A100")),
    ("accept_models", str, _("other models it may run on: A100,H100, vendor:amd or memory>=80")),
    ("gpus_per_node", int, _("GPUs per node")),
    ("nodes", int, _("number of nodes (default 1)")),
    ("topology", str, _("any, same_node, same_rack or same_network_domain")),
    ("gpu_share", float, _("a share of one GPU below 1, e.g. 0.25")),
    ("cpus_per_node", float, _("CPUs per node (default: the task type's per GPU)")),
    ("memory_gb_per_node", float, _("memory per node in GB (default: the task type's)")),
    ("image", str, _("container image, e.g. registry.local/pytorch:2.4")),
    ("command", str, _("command to run")),
    ("max_runtime_minutes", int, _("max runtime in minutes (default: the task type's)")),
    ("mail_type", str, _("mail me when it BEGINs, ENDs, FAILs or is REQUEUEd (comma-separated; ALL or NONE), as "
                         "Slurm's --mail-type; default: my notification preferences")),
    ("kind", str, _("batch (default), notebook, service or array")),
    ("depends_on", str, _("start only after other jobs, as Slurm's --dependency: afterok:812:813,afterany:820 "
                          "(afterok, afterany, afternotok, aftercorr; in a --batch file @0 names its first job)")),
    ("array", str, _("array: task indices, e.g. 0-99, 0-99:2 or 1,3,7")),
    ("array_parallelism", int, _("array: the most tasks running at once (default: no limit)")),
    ("replicas", int, _("service: how many replicas serve (default 1)")),
    ("port", int, _("service: the port the program listens on (default 8000)")),
    ("ports", str, _("named ports the program serves, opened through the portal while it runs: "
                     "tensorboard:6006,ui:8080")),
)


def _job_file(path: str) -> dict:
    """A YAML (or JSON) mapping of submit fields; ``-`` reads standard input. Dashes in keys are allowed."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise CliError(_("Cannot read the job file %(path)s: %(error)s") % {"path": path, "error": exc.strerror},
                       ExitCode.USAGE) from None
    except yaml.YAMLError as exc:
        raise CliError(_("The job file %(path)s is not valid YAML: %(error)s") % {"path": path, "error": exc},
                       ExitCode.USAGE) from None
    if not isinstance(data, dict):
        raise CliError(_("The job file %(path)s must be a mapping of fields (gpu_model: A100, …).") % {"path": path},
                       ExitCode.USAGE)
    return {str(key).replace("-", "_"): value for key, value in data.items()}


def _batch_file(path: str) -> list:
    """A YAML (or JSON) list of job mappings, each with the fields of a job file (or ``{"jobs": [...]}``)."""
    try:
        data = yaml.safe_load(sys.stdin.read() if path == "-" else Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(_("Cannot read the batch file %(path)s: %(error)s") % {
            "path": path, "error": getattr(exc, "strerror", None) or exc}, ExitCode.USAGE) from None
    jobs = data.get("jobs") if isinstance(data, dict) else data
    if not isinstance(jobs, list) or not all(isinstance(job, dict) for job in jobs):
        raise CliError(_("The batch file %(path)s must be a list of jobs, each a mapping of fields.") % {
            "path": path}, ExitCode.USAGE)
    return [{str(key).replace("-", "_"): value for key, value in job.items()} for job in jobs]


def _batch_submitted(answer: dict) -> str:
    ids = [str(job_id) for spec in answer["jobs"] for job_id in spec["ids"]]
    shown = ", ".join(ids[:20]) + (", …" if len(ids) > 20 else "")
    return _("Submitted %(n)s jobs in one batch: %(ids)s.") % {"n": answer["created"], "ids": shown}


def _script(path: str) -> str:
    """A batch script's text, sent as it is: the portal reads its directives (and names their lines)."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else _("not UTF-8 text")
        raise CliError(_("Cannot read the batch script %(path)s: %(error)s") % {"path": path, "error": why},
                       ExitCode.USAGE) from None


def _group_line(job: dict) -> list[str]:
    """Where a service replica or an array task belongs, and the command that shows the whole of it."""
    if not job.get("group"):
        return []
    if job.get("kind") == "service":
        return [_("Service %(id)s: `gpuportal service show %(id)s`.") % {"id": job["group"]}]
    return [_("Array %(id)s: `gpuportal array show %(id)s`.") % {"id": job["group"]}]


def _submitted(job: dict) -> str:
    head = _("Submitted job %(id)s (%(name)s): %(status)s.") % {"id": job["id"], "name": job.get("name"),
                                                                 "status": job.get("status")}
    return "\n".join([head, *_group_line(job), *explain.explain(job).splitlines()[1:]])


def _parameters(pairs: list[str] | None) -> dict:
    """``--param name=value`` (repeatable) as a mapping; values stay text, the portal checks their types."""
    values = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CliError(_("--param takes name=value, e.g. --param epochs=20 (got %(pair)r).") % {"pair": pair},
                           ExitCode.USAGE)
        values[name.strip()] = value
    return values


def _template(portal: Portal, reference: str) -> dict:
    """The template named ``reference`` (or of that id) among those the caller may use."""
    what = _("Template %(name)s") % {"name": reference}
    if reference.isdigit():
        return portal.get(f"/api/templates/{reference}/", what=what)
    found = portal.collect("/api/templates/", {"name": reference})["results"]
    if not found:
        raise CliError(_("%(what)s was not found (or is not among what you may use); `gpuportal templates` lists "
                         "them.") % {"what": what}, ExitCode.NOT_FOUND, 404)
    if len(found) > 1:
        raise CliError(_("Several templates are named %(name)s; give its id instead: %(ids)s.") % {
            "name": reference, "ids": ", ".join(f"{t['id']} ({t.get('tenant') or _('platform')})" for t in found)},
            ExitCode.USAGE)
    return found[0]


def submit(ctx: Context) -> int:
    args = ctx.args
    if args.batch:  # every job of the file in one call: all are stored, or none
        given = [f"--{name.replace('_', '-')}" for name, _kind, _help in SUBMIT_OPTIONS
                 if getattr(args, name) is not None]
        given += [flag for flag, value in (("--file", args.file), ("--sbatch", args.sbatch),
                                           ("--template", args.template), ("--param", args.param),
                                           ("--requeue-on-preemption", args.requeue_on_preemption))
                  if value is not None and value != []]
        if given:  # never dropped without a word: each job of the file says all of its fields
            raise CliError(_("--batch takes every field from its file; leave out %(flags)s.") % {
                "flags": ", ".join(given)}, ExitCode.USAGE)
        headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
        return ctx.emit(ctx.portal().post("/api/jobs/batch/", {"jobs": _batch_file(args.batch)}, headers=headers),
                        _batch_submitted)
    body = _job_file(args.file) if args.file else {}
    for name, _kind, _help in SUBMIT_OPTIONS:
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.requeue_on_preemption is not None:
        body["requeue_on_preemption"] = args.requeue_on_preemption
    if isinstance(body.get("ports"), str):  # the API takes a list of name:port entries
        body["ports"] = [entry.strip() for entry in body["ports"].replace(" ", ",").split(",") if entry.strip()]
    if args.sbatch:
        body["sbatch"] = _script(args.sbatch)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    if args.param and not args.template:
        raise CliError(_("--param needs --template (parameters belong to a template)."), ExitCode.USAGE)
    if not args.template:
        return ctx.emit(ctx.portal().post("/api/jobs/", body, headers=headers), _submitted)
    if "kind" in body:
        raise CliError(_("--kind comes from the template; leave it out with --template."), ExitCode.USAGE)
    portal = ctx.portal()
    template = _template(portal, args.template)
    body["parameters"] = {**(body.get("parameters") or {}), **_parameters(args.param)}
    job = portal.post(f"/api/templates/{template['id']}/submit/", body, headers=headers,
                      what=_("Template %(name)s") % {"name": args.template})
    return ctx.emit(job, _submitted)


def _parameter_text(parameter: dict) -> str:
    default = parameter.get("default")
    return f"{parameter['name']}={render.cell(default) if default is not None else '?'}"


def templates(ctx: Context) -> int:
    data = ctx.portal().collect("/api/templates/")
    return ctx.emit(data, lambda d: render.table(
        [_("ID"), _("NAME"), _("OWNER"), _("KIND"), _("VERSION"), _("PARAMETERS (DEFAULT)")],
        [[t["id"], t["name"], t.get("tenant") or _("platform"), t["kind"], t.get("version"),
          " ".join(_parameter_text(p) for p in t.get("parameters") or [])] for t in d["results"]])
        if d["results"] else _("No templates."))


def clone(ctx: Context) -> int:
    job_id = ctx.args.job
    job = ctx.portal().post(f"/api/jobs/{job_id}/clone/", what=_("Job %(id)s") % {"id": job_id})
    return ctx.emit(job, lambda j: "\n".join([
        _("Cloned job %(old)s as job %(id)s (%(name)s): %(status)s.") % {
            "old": job_id, "id": j["id"], "name": j.get("name"), "status": j.get("status")},
        *explain.explain(j).splitlines()[1:]]))


def _job_rows(jobs: list[dict]) -> list[list]:
    rows = []
    for job in jobs:
        why = (job.get("wait_reason") or {}).get("code") or (job.get("failure") or {}).get("category")
        position = job.get("queue_position")
        rows.append([job["id"], job.get("name"), f"{job.get('tenant')}/{job.get('project')}", job.get("owner"),
                     job.get("task_type"), render.size(job), job.get("status"),
                     f"{position} ({job.get('tenant_queue_position')})" if position else None, why])
    return rows


def jobs(ctx: Context) -> int:
    args = ctx.args
    query = {"status": args.status, "task_type": args.task_type, "gpu_model": args.gpu_model, "tenant": args.tenant,
             "project": args.project, "owner": args.owner, "mine": "true" if args.mine else None, "q": args.search,
             "sort": args.sort}
    data = ctx.portal().collect("/api/jobs/", query, limit=args.limit)

    def human(page):
        if not page["results"]:
            return _("No jobs match.")
        text = render.table([_("ID"), _("NAME"), _("PROJECT"), _("OWNER"), _("TYPE"), _("SIZE"), _("STATUS"),
                             _("POSITION (TENANT)"), _("WHY")], _job_rows(page["results"]))
        if page["count"] > len(page["results"]):
            text += "\n" + _("%(shown)s of %(count)s jobs; --limit N to see more.") % {
                "shown": len(page["results"]), "count": page["count"]}
        return text

    return ctx.emit(data, human)


def _job(ctx: Context, job_id: int) -> dict:
    return ctx.portal().get(f"/api/jobs/{job_id}/", what=_("Job %(id)s") % {"id": job_id})


def show(ctx: Context) -> int:
    return ctx.emit(_job(ctx, ctx.args.job), explain.details)


def open_port(ctx: Context) -> int:
    """``gpuportal open JOB PORT``: where a running job's named port opens through the portal, opened in the web
    browser (which signs in to the portal if it has to) unless ``--print``."""
    args = ctx.args
    job = _job(ctx, args.job)
    ports = job.get("ports") or []
    port = next((p for p in ports if p.get("name") == args.port), None)
    if port is None:
        raise CliError(_("Job %(id)s declared no port named %(name)s; its ports: %(names)s.") % {
            "id": args.job, "name": args.port, "names": ", ".join(p["name"] for p in ports) or _("none")},
            ExitCode.NOT_FOUND)
    if not port.get("url"):
        raise CliError(_("Job %(id)s is %(status)s: its ports open only while it runs.") % {
            "id": args.job, "status": job.get("status")}, ExitCode.REFUSED)
    if not args.print and not ctx.json:
        webbrowser.open(port["url"])
    return ctx.emit(port, lambda p: p["url"])


def efficiency(ctx: Context) -> int:
    """``gpuportal efficiency JOB``: how the job used the GPUs it held (so far, while it runs)."""
    answer = ctx.portal().get(f"/api/jobs/{ctx.args.job}/efficiency/", what=_("Job %(id)s") % {"id": ctx.args.job})
    return ctx.emit(answer, efficiency_text.summary)


def why(ctx: Context) -> int:
    return ctx.emit(_job(ctx, ctx.args.job), explain.explain)


def _job_action(ctx: Context, action: str, body: dict | None = None) -> int:
    job_id = ctx.args.job
    job = ctx.portal().post(f"/api/jobs/{job_id}/{action}/", body, what=_("Job %(id)s") % {"id": job_id})
    return ctx.emit(job, explain.explain)


def cancel(ctx: Context) -> int:
    return _job_action(ctx, "cancel", {"reason": ctx.args.reason} if ctx.args.reason else {})


def hold(ctx: Context) -> int:
    return _job_action(ctx, "hold")


def release(ctx: Context) -> int:
    return _job_action(ctx, "release")


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """The lines of ``current`` not shown yet, both being the last lines of the same growing log.

    The log grew by ``g`` lines when ``previous[g:]`` is where ``current`` starts; the smallest such ``g``
    is taken so a repeated line is never printed twice. Without any overlap (``g`` = all of ``previous``),
    all of ``current`` is new."""
    for grown in range(len(previous) + 1):
        kept = previous[grown:]
        if current[: len(kept)] == kept:
            return current[len(kept):]
    return current


def logs(ctx: Context) -> int:
    """The last lines of the job's current attempt; ``--follow`` polls until the job has ended."""
    args, portal = ctx.args, ctx.portal()
    path, what = f"/api/jobs/{args.job}/log/", _("The log of job %(id)s") % {"id": args.job}
    answer = portal.get(path, {"tail": args.tail}, what=what)
    if not args.follow:
        return ctx.emit(answer, lambda a: "\n".join(a.get("lines") or []))
    shown, attempt = [], None
    while True:
        lines = answer.get("lines") or []
        if answer.get("attempt") != attempt:
            if attempt is not None and not ctx.json:
                print(_("--- attempt %(n)s ---") % {"n": answer.get("attempt")})
            fresh, attempt = lines, answer.get("attempt")
        else:
            fresh = new_lines(shown, lines)
        shown = lines
        if ctx.json and (fresh or answer.get("complete")):
            print(json.dumps({**answer, "lines": fresh}, ensure_ascii=False), flush=True)
        elif fresh:
            print("\n".join(fresh), flush=True)
        if answer.get("complete"):
            return ExitCode.OK
        time.sleep(args.interval)
        answer = portal.get(path, {"tail": args.tail}, what=what)


# --- quotas, queue, requests, reports -------------------------------------------------------------------


def quota(ctx: Context) -> int:
    data = ctx.portal().collect("/api/quotas/")
    return ctx.emit(data, lambda d: render.table(
        [_("TENANT"), _("GPU MODEL"), _("USED"), _("QUEUED"), _("GUARANTEED"), _("LIMIT"), _("OF WHICH BURST")],
        [[q["tenant"], q["gpu_model"], q["used"], q["queued"], q["guaranteed"], q["limit"], q["burst"]]
         for q in d["results"]]) if d["results"] else _("No quotas: you belong to no tenant with a quota."))


def queue(ctx: Context) -> int:
    data = ctx.portal().collect("/api/queue/", {"cluster": ctx.args.cluster})
    return ctx.emit(data, lambda d: render.table(
        [_("GPU MODEL"), _("POS"), _("JOB"), _("TENANT"), _("TYPE"), _("PRIORITY"), _("SIZE"), _("ESTIMATED START"),
         _("WHY")],
        # the place among the jobs waiting for the same model: the order in which that model's GPUs go
        [[r.get("gpu_model") or "", r.get("model_position") or r["position"], r["job"], r["tenant"], r["task_type"],
          r["priority"], r["size"],
          render.when(r.get("estimated_start")), r.get("message") or r["wait_reason"]] for r in d["results"]])
        if d["results"] else _("Nothing waits."))


def _impact(impact: dict) -> str:
    if not impact:
        return render.EMPTY
    text = _("starts %(s)s job(s), preempts %(p)s, delays %(d)s") % {
        "s": len(impact.get("starts") or []), "p": len(impact.get("preempts") or []),
        "d": len(impact.get("delays") or [])}
    others = sorted(set(impact.get("other_tenants_preempted") or []) | set(impact.get("other_tenants_delayed") or []))
    return text + (_("; other tenants affected: %(t)s") % {"t": ", ".join(others)} if others else "")


def _request_text(request: dict) -> str:
    lines = [_("Request %(id)s (%(kind)s, tenant %(tenant)s) by %(who)s is %(state)s.") % {
        "id": request["id"], "kind": request["kind"], "tenant": request.get("tenant"),
        "who": request.get("requester"), "state": request["state"]}]
    asked = {key: request.get(key) for key in ("job", "task_type", "gpu_model", "gpus", "start", "end",
                                               "max_runtime_minutes", "guaranteed", "limit")
             if request.get(key) not in (None, "")}
    if (request.get("jobs") or 1) > 1:  # an array's tasks decided together: the first job, and how many in all
        asked["jobs"] = request["jobs"]
    if asked:
        lines.append(_("Asks: %(fields)s") % {"fields": ", ".join(f"{k}={v}" for k, v in asked.items())})
    lines.append(_("Why: %(j)s") % {"j": request.get("justification")})
    lines.append(_("Impact: %(i)s") % {"i": _impact(request.get("impact") or {})})
    if request.get("decided_by"):
        lines.append(_("Decided by %(who)s %(at)s: %(comment)s") % {
            "who": request["decided_by"], "at": render.when(request.get("decided_at")),
            "comment": request.get("comment") or render.EMPTY})
    elif request["state"] == "pending":
        lines.append(_("Decided by: %(scope)s approver; expires %(at)s.") % {
            "scope": _("a platform") if request.get("scope") == "platform" else _("a tenant"),
            "at": render.when(request.get("expires_at"))})
    return "\n".join(lines)


def requests_list(ctx: Context) -> int:
    data = ctx.portal().collect("/api/priority-requests/", {"state": ctx.args.state, "kind": ctx.args.kind})
    return ctx.emit(data, lambda d: render.table(
        [_("ID"), _("KIND"), _("STATE"), _("TENANT"), _("BY"), _("JOB"), _("CREATED"), _("JUSTIFICATION")],
        [[r["id"], r["kind"], r["state"], r.get("tenant"), r.get("requester"), _jobs_of(r),
          render.when(r.get("created"), relative=False), (r.get("justification") or "")[:60]]
         for r in d["results"]]) if d["results"] else _("No requests."))


def _jobs_of(request: dict):
    """The request's job, with how many more it decides (an array's tasks share one admission request)."""
    more = (request.get("jobs") or 1) - 1
    return f"{request.get('job')} (+{more})" if more > 0 and request.get("job") else request.get("job")


def _request_what(request_id) -> str:
    return _("Request %(id)s") % {"id": request_id}


def requests_show(ctx: Context) -> int:
    request_id = ctx.args.request
    return ctx.emit(ctx.portal().get(f"/api/priority-requests/{request_id}/", what=_request_what(request_id)),
                    _request_text)


#: ``requests ask``'s fields besides kind and justification (``POST /api/priority-requests/``).
REQUEST_OPTIONS = (("job", int), ("task_type", str), ("tenant", str), ("gpu_model", str), ("gpus", int),
                   ("start", str), ("end", str), ("max_runtime_minutes", int), ("guaranteed", int), ("limit", int))


def requests_ask(ctx: Context) -> int:
    args = ctx.args
    body = {"kind": args.kind, "justification": args.justification}
    body.update({name: getattr(args, name) for name, _kind in REQUEST_OPTIONS if getattr(args, name) is not None})
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    return ctx.emit(ctx.portal().post("/api/priority-requests/", body, headers=headers), _request_text)


def _decide(ctx: Context, action: str) -> int:
    request_id = ctx.args.request
    body = {"comment": ctx.args.comment} if ctx.args.comment else {}
    return ctx.emit(ctx.portal().post(f"/api/priority-requests/{request_id}/{action}/", body,
                                      what=_request_what(request_id)), _request_text)


def requests_approve(ctx: Context) -> int:
    return _decide(ctx, "approve")


def requests_deny(ctx: Context) -> int:
    return _decide(ctx, "deny")


def _hours(value) -> str:
    return render.cell(value) if value is not None else render.EMPTY


def _report_text(report: dict) -> str:
    jobs_done = report.get("jobs") or {}
    scope = _("tenant %(t)s") % {"t": report["tenant"]} if report.get("tenant") else _("the whole platform")
    lines = [
        _("Report for %(month)s, %(scope)s (%(state)s; generated %(at)s).") % {
            "month": report.get("month"), "scope": scope, "at": render.when(report.get("generated_at"), False),
            "state": _("closed month") if report.get("closed") else _("month still open")},
        _("GPU-hours allocated %(a)s, used %(u)s, efficiency %(e)s; cost %(c)s %(cur)s.") % {
            "a": _hours(report.get("gpu_hours_allocated")), "u": _hours(report.get("gpu_hours_used")),
            "e": _hours(report.get("efficiency")), "c": _hours(report.get("cost")), "cur": report.get("currency")},
        _("Jobs submitted %(n)s: %(ok)s succeeded, %(failed)s failed, %(cancelled)s cancelled, %(pre)s preempted.")
        % {"n": jobs_done.get("submitted", 0), "ok": jobs_done.get("succeeded", 0),
           "failed": jobs_done.get("failed", 0), "cancelled": jobs_done.get("cancelled", 0),
           "pre": jobs_done.get("preempted", 0)},
        _("Wait: median %(m)s s, p95 %(p)s s.") % {"m": _hours(report.get("wait_seconds_median")),
                                                     "p": _hours(report.get("wait_seconds_p95"))}]
    for key, title in (("by_project", _("By project")), ("by_gpu_model", _("By GPU model")),
                       ("by_task_type", _("By task type")), ("by_tenant", _("By tenant"))):
        if report.get(key):
            lines += ["", title + ":", render.table(
                [_("NAME"), _("GPU-H ALLOCATED"), _("GPU-H USED"), _("EFFICIENCY"), _("COST")],
                [[r["name"], r["gpu_hours_allocated"], r["gpu_hours_used"], r["efficiency"], r["cost"]]
                 for r in report[key]])]
    return "\n".join(lines)


def report(ctx: Context) -> int:
    month = ctx.args.month or f"{date.today():%Y-%m}"
    data = ctx.portal().get(f"/api/reports/monthly/{quote(month, safe='')}/", {"tenant": ctx.args.tenant},
                            what=_("The report of tenant %(t)s") % {"t": ctx.args.tenant} if ctx.args.tenant
                            else _("The report of %(m)s") % {"m": month})
    return ctx.emit(data, _report_text)


# --- services and arrays ----------------------------------------------------------------------------------

#: Lists of members a service or array answer may carry, in the order they are looked for.
MEMBER_KEYS = ("replicas", "tasks", "members", "jobs")


def _group_text(group: dict) -> str:
    """A service or array: its scalar fields one a line, then its members (replicas or tasks) as a table."""
    lines = [f"{key}: {render.cell(value)}" for key, value in group.items()
             if not isinstance(value, dict | list) and key not in ("request",)]
    for key, value in group.items():
        if isinstance(value, dict) and key != "request":
            lines.append(f"{key}: " + ", ".join(f"{k}={render.cell(v)}" for k, v in value.items()))
    members = next((group[key] for key in MEMBER_KEYS if isinstance(group.get(key), list)), None)
    if members and all(isinstance(m, dict) for m in members):
        columns = [c for c in ("job", "replica", "index", "revision", "status", "ready", "restarts", "problem") if any(
            c in m for m in members)]
        lines += ["", render.table([c.upper() for c in columns], [[m.get(c) for c in columns] for m in members])]
    return "\n".join(lines)


def _group_call(ctx: Context, what_type: str, path: str, body: dict | None = None, post: bool = False) -> int:
    group_id = ctx.args.group
    what = (_("Service %(id)s") if what_type == "services" else _("Array %(id)s")) % {"id": group_id}
    portal = ctx.portal()
    url = f"/api/{what_type}/{group_id}/{path}"
    data = portal.post(url, body, what=what) if post else portal.get(url, what=what)
    return ctx.emit(data if data is not None else {"id": group_id}, _group_text)


def service_show(ctx: Context) -> int:
    return _group_call(ctx, "services", "")


def service_scale(ctx: Context) -> int:
    return _group_call(ctx, "services", "scale/", {"replicas": ctx.args.replicas}, post=True)


def service_rollout(ctx: Context) -> int:
    return _group_call(ctx, "services", "rollout/", {"image": ctx.args.image}, post=True)


def service_stop(ctx: Context) -> int:
    return _group_call(ctx, "services", "stop/", {}, post=True)


def array_show(ctx: Context) -> int:
    return _group_call(ctx, "arrays", "")


def array_cancel(ctx: Context) -> int:
    return _group_call(ctx, "arrays", "cancel/", {}, post=True)
