"""The portal's client of slurmrestd: versioned REST paths, JWT per user, typed answers.

One ``SlurmClient`` speaks for one account on one cluster. It chooses the newest REST version the cluster
offers among those the portal has an adapter for, once, and maps every answer through that adapter into the
shapes of ``shapes.py``. Requests time out and are retried as ``settings.SLURM`` says; a submit is retried
only when it never reached slurmrestd, so a job is never submitted twice."""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime
from functools import cached_property

import urllib3
from django.conf import settings
from django.utils import timezone

from scheduling.executors.slurm.adapters import ADAPTERS, SUPPORTED_VERSIONS, problems
from scheduling.executors.slurm.shapes import (
    AccountedJob,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmProblem,
    SubmitResult,
)
from scheduling.executors.slurm.tokens import TokenError, token_for

logger = logging.getLogger(__name__)

#: Slurm's numbers for "no such job": the answer then means "gone", not "broken".
INVALID_JOB_ID = 2017
ALREADY_DONE = 2021  # "Job/step already completing or completed"
NOTHING_FOUND = 9003  # slurmdb: no record matches

_pool = urllib3.PoolManager(num_pools=16, maxsize=8)


class SlurmError(Exception):
    """slurmrestd could not be reached or refused a request. The message says which cluster, which request and
    Slurm's own words; it never carries a token. ``http_status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, problems: tuple[SlurmProblem, ...] = ()):
        super().__init__(message)
        self.http_status = status
        self.problems = problems

    def has(self, number: int) -> bool:
        return any(problem.number == number for problem in self.problems)


class SlurmClient:
    def __init__(self, cluster, user: str | None = None):
        self.cluster = cluster
        self.user = user or cluster.slurm_run_as or cluster.slurm_user or "slurm"
        self.base = (cluster.slurm_url or "").rstrip("/")
        self._meta: dict = {}

    # --- the transport ------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None, user: str | None = None,
                idempotent: bool = True) -> tuple[int, dict]:
        """Send one request as ``user`` (default the client's); returns the HTTP status and the JSON answer.
        Raises SlurmError when there is no JSON answer at all (unreachable, timed out, not slurmrestd)."""
        user = user or self.user
        try:
            token = token_for(self.cluster, user)
        except TokenError as exc:
            raise SlurmError(str(exc)) from None
        timeout = float(settings.SLURM["REQUEST_TIMEOUT_SECONDS"])
        tries = int(settings.SLURM["RETRIES"])
        retries = urllib3.Retry(total=tries, connect=tries, read=tries if idempotent else 0, status=0, other=0,
                                backoff_factor=0.2, allowed_methods=None, raise_on_status=False)
        headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = _pool.request(method, self.base + path, body=data, headers=headers, retries=retries,
                                     timeout=urllib3.Timeout(connect=timeout, read=timeout), redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise SlurmError(f"slurmrestd of cluster {self.cluster.name} did not answer {method} {path}: "
                             f"{type(exc).__name__}") from None
        try:
            answer = json.loads(response.data or b"{}")
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SlurmError(f"slurmrestd of cluster {self.cluster.name} answered {method} {path} with HTTP "
                             f"{response.status} and no JSON", status=response.status)
        if answer.get("meta"):
            self._meta = answer["meta"]
        return response.status, answer

    def call(self, method: str, path: str, body: dict | None = None, user: str | None = None) -> dict:
        """A request whose answer must be a success: anything else raises SlurmError with Slurm's words (a bad,
        expired or mismatched token is a 500 with "Unspecified error", not a 401). slurmdb answers its refusals
        (a refused token included) with 200 and errors, so errors count whatever the status."""
        status, answer = self.request(method, path, body=body, user=user)
        found = problems(answer)
        if status >= 400 or found:
            raise SlurmError(self._describe(method, path, status, found), status=status, problems=found)
        return answer

    def _describe(self, method: str, path: str, status: int, found) -> str:
        words = "; ".join(f"{problem.message} ({problem.number})" for problem in found) or "no reason given"
        return f"slurmrestd of cluster {self.cluster.name} refused {method} {path} (HTTP {status}): {words}"

    # --- versions ----------------------------------------------------------------------------------------

    def versions(self) -> tuple[str, ...]:
        """The ``openapi/v0.0.3x`` versions the cluster serves, from its OpenAPI description."""
        paths = self.call("GET", "/openapi/v3").get("paths") or {}
        found = {path.split("/")[2] for path in paths if path.startswith("/slurm/v")}
        return tuple(sorted(found))

    @cached_property
    def api_version(self) -> str:
        """The newest version offered that the portal has an adapter for (chosen once per client)."""
        offered = set(self.versions())
        for version in SUPPORTED_VERSIONS:
            if version in offered:
                return version
        raise SlurmError(f"slurmrestd of cluster {self.cluster.name} offers none of the REST versions the portal "
                         f"speaks ({', '.join(SUPPORTED_VERSIONS)}); it offers {', '.join(sorted(offered)) or 'none'}")

    @property
    def adapter(self):
        return ADAPTERS[self.api_version]

    @property
    def slurm_version(self) -> str:
        """Slurm's release, as the last answer's ``meta`` said it."""
        if not self._meta:
            self.ping()
        return str(((self._meta.get("Slurm") or {}).get("release")) or "")

    # --- slurmctld --------------------------------------------------------------------------------------

    def ping(self) -> bool:
        try:
            self.call("GET", self.adapter.slurm_path("ping"))
        except SlurmError:
            return False
        return True

    def nodes(self) -> list[SlurmNode]:
        answer = self.call("GET", self.adapter.slurm_path("nodes"))
        return [self.adapter.node(raw) for raw in answer.get("nodes") or ()]

    def partitions(self) -> list[SlurmPartition]:
        answer = self.call("GET", self.adapter.slurm_path("partitions"))
        return [self.adapter.partition(raw) for raw in answer.get("partitions") or ()]

    def jobs(self) -> list[SlurmJob]:
        """Every job slurmctld knows, of every user (one request: the executor's sync reads all at once)."""
        answer = self.call("GET", self.adapter.slurm_path("jobs"))
        return [self.adapter.job(raw) for raw in answer.get("jobs") or ()]

    def job(self, job_id: int) -> SlurmJob | None:
        """The job, or None when slurmctld no longer knows it (ended longer than ``MinJobAge`` ago)."""
        try:
            answer = self.call("GET", self.adapter.slurm_path(f"job/{int(job_id)}"))
        except SlurmError as exc:
            if exc.has(INVALID_JOB_ID):
                return None
            raise
        jobs = [self.adapter.job(raw) for raw in answer.get("jobs") or ()]
        return next((job for job in jobs if job.job_id == int(job_id)), None)

    def submit(self, script: str, job: dict, user: str) -> SubmitResult:
        """Submit a batch job as ``user``. Judged by the job id alone: a held job or a time limit above the
        partition's answers an id and an error; a request that can never run answers 500 and no id."""
        status, answer = self.request("POST", self.adapter.slurm_path("job/submit"),
                                      body={"script": script, "job": job}, user=user, idempotent=False)
        job_id = answer.get("job_id")
        found = problems(answer)
        if job_id is None and status >= 400 and not found:
            raise SlurmError(self._describe("POST", "job/submit", status, found), status=status)
        return SubmitResult(job_id=int(job_id) if job_id is not None else None, errors=found,
                            warnings=problems(answer, "warnings"))

    def cancel(self, job_id: int, user: str | None = None) -> bool:
        """Cancel the job (``DELETE``); False when Slurm does not know it or it had ended already."""
        try:
            self.call("DELETE", self.adapter.slurm_path(f"job/{int(job_id)}"), user=user)
        except SlurmError as exc:
            if exc.has(INVALID_JOB_ID) or exc.has(ALREADY_DONE):
                return False
            raise
        return True

    # --- slurmdbd ----------------------------------------------------------------------------------------

    def has_accounting(self) -> bool:
        """Whether slurmrestd serves slurmdb (it does only when the cluster runs slurmdbd)."""
        try:
            paths = self.call("GET", "/openapi/v3").get("paths") or {}
        except SlurmError:
            return False
        if not any(path.startswith(f"/slurmdb/{self.api_version}/") for path in paths):
            return False
        try:
            self.call("GET", self.adapter.db_path("diag"))
        except SlurmError:
            return False
        return True

    def db_jobs(self, start: datetime, end: datetime) -> list[AccountedJob]:
        """Jobs slurmdb recorded between ``start`` and ``end`` (raises SlurmError without slurmdbd). Slurm 22.05
        refuses epoch seconds here (error 9000) and reads other absolute times in the cluster's own time zone, which
        the portal does not know: the window goes as times relative to the cluster's now ("now-3600seconds"), off
        only by the two clocks' skew."""
        now = timezone.now()
        since, until = (max(0, math.ceil((now - moment).total_seconds())) for moment in (start, end))
        path = self.adapter.db_path(f"jobs?start_time=now-{since}seconds&end_time=now-{until}seconds")
        try:
            answer = self.call("GET", path)
        except SlurmError as exc:
            if exc.has(NOTHING_FOUND):
                return []
            raise
        return [self.adapter.accounted(raw) for raw in answer.get("jobs") or ()]

    def db_job(self, job_id: int) -> AccountedJob | None:
        """slurmdb's record of the job; None when it has none (yet)."""
        try:
            answer = self.call("GET", self.adapter.db_path(f"job/{int(job_id)}"))
        except SlurmError as exc:
            if exc.has(NOTHING_FOUND):
                return None
            raise
        jobs = [self.adapter.accounted(raw) for raw in answer.get("jobs") or ()]
        return next((job for job in jobs if job.job_id == int(job_id)), None)
