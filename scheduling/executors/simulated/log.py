"""What a simulated job prints: made up on read from the facts the portal stores, never stored itself.

A run is its start (``started_at``), the moment its program stopped printing and how it ended. The lines
follow that timeline: a start banner on every pod, a progress line per simulated minute on pod 0 (the step,
the loss, the throughput), then what a real run prints as it ends — the end of training, a CUDA
out-of-memory traceback, the NCCL watchdog's timeout on every rank, a program error (an ``ImportError``,
an argument error, a segfault), an Xid from the driver, or the SIGTERM of a cancel or a deadline. The
failure lines are those ``kubernetes/diagnosis.py`` recognises, so one set of rules classifies a
simulated failure and a Kubernetes one (``SimulatedExecutor`` calls it with this log).

Only the asked-for tail is made, so a long run costs no more to read than a short one. The lines are the
program's own output, not the portal's words: they are not translated.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from fleet import vendors
from fleet.catalogue import vendor_of
from scheduling.models import FailureCategory, JobAllocation, JobStatus

PROGRESS_EVERY_SECONDS = 60  # simulated
#: NCCL's default collective timeout: the watchdog fires this long (simulated) after the last step; the
#: program prints it in real milliseconds, like every duration and moment it prints.
WATCHDOG_SECONDS = 1800
#: Endings other than a failure category.
SUCCEEDED, STOPPED = "succeeded", "stopped"
_ENDINGS = {JobStatus.SUCCEEDED: SUCCEEDED, JobStatus.CANCELLED: STOPPED, JobStatus.PREEMPTED: STOPPED}


@dataclass(frozen=True)
class Run:
    """One attempt of a simulated job as its log tells it."""

    job_id: int
    attempt: int  # 1 for the first run
    image: str
    command: str
    gpu_model: str
    gpus_per_node: int
    nodes: tuple[str, ...]  # pod i runs on nodes[i]
    gpu_memory_gib: float
    started: datetime
    stopped: datetime  # when the program stopped printing (now, for a run still going)
    scale: float  # real seconds per simulated second
    ending: str | None  # None while it runs; SUCCEEDED, STOPPED or a FailureCategory
    exit_code: int | None = None
    failing_gpu: int = 0
    faulted: bool = False  # the node agent reported the fault (rather than the plan)
    vendor: str = vendors.DEFAULT_VENDOR  # whose devices it ran on: its stack, libraries and errors read as theirs

    @property
    def pod_count(self) -> int:
        return max(len(self.nodes), 1)

    def pod_name(self, index: int) -> str:
        return f"sim-{self.job_id}-a{self.attempt - 1}-{index}"

    def at(self, simulated_seconds: float) -> datetime:
        return self.started + timedelta(seconds=simulated_seconds * self.scale)

    def simulated_seconds(self, moment: datetime) -> float:
        return max((moment - self.started).total_seconds() / self.scale, 0.0)


def time_scale(job) -> float:
    """Real seconds per simulated second of the job's attempt: the cluster's pace (``SIMULATION_TIME_SCALE``)
    unless its executor state names its own (the demo's back-dated history ran in real time: 1)."""
    return max(float((job.executor_state or {}).get("time_scale") or settings.SIMULATION_TIME_SCALE), 1e-9)


def attempt_nodes(job) -> tuple[tuple[str, ...], float]:
    """Node names of the current attempt's GPUs (pod order) and their memory in GiB; released allocations
    count (the attempt may have ended), earlier attempts' do not."""
    rows = {(a.gpu.node.name, a.gpu.memory_mb) for a in JobAllocation.objects.filter(job=job).select_related(
        "gpu__node") if job.admitted_at is None or a.allocated_at >= job.admitted_at}
    return tuple(sorted({name for name, _memory in rows})), (max((m for _n, m in rows), default=81920) / 1024)


def run_of(job, now: datetime, ending: str | None = None) -> Run | None:
    """The current attempt of ``job`` as a :class:`Run`, or None when it has not started. ``ending``
    overrides how it ended (the executor asks for the log of the failure it is about to record)."""
    state = job.executor_state or {}
    plan = state.get("plan")
    dispatched = datetime.fromisoformat(state["dispatched_at"]) if state.get("dispatched_at") else None
    if not plan or job.started_at is None or (dispatched and job.started_at < dispatched):
        return None  # not started, or started_at belongs to an earlier attempt
    if ending is None:
        if job.status == JobStatus.FAILED:
            ending = job.failure_category or FailureCategory.EXIT_CODE
        elif job.status != JobStatus.RUNNING:
            ending = _ENDINGS.get(job.status)
            if ending is None:
                return None
    scale = time_scale(job)
    stopped = now if job.status == JobStatus.RUNNING else (job.finished_at or job.last_updated or now)
    fault = state.get("fault")
    if dispatched:  # run by the executor: the program stopped when its plan, its deadline or the fault says
        planned = plan["run_minutes"] * 60 * scale
        if job.max_runtime_minutes is not None:
            planned = min(planned, job.max_runtime_minutes * 60)
        stop_at = datetime.fromisoformat(fault["at"]) if fault else job.started_at + timedelta(seconds=planned)
        stopped = min(stopped, stop_at)
    nodes, memory = attempt_nodes(job)
    return Run(job_id=job.pk, attempt=job.retry_count + 1, image=job.image, command=job.command,
               gpu_model=job.gpu_model, gpus_per_node=job.gpus_per_node, nodes=nodes or ("?",),
               gpu_memory_gib=memory, started=job.started_at, stopped=max(stopped, job.started_at), scale=scale,
               ending=ending, exit_code=job.exit_code if job.exit_code is not None else exit_code_of(ending, plan),
               failing_gpu=plan.get("failing_gpu", 0), faulted=bool(fault), vendor=vendor_of(job.gpu_model))


def exit_code_of(ending: str | None, plan: dict) -> int | None:
    """The exit code a simulated run ends with: the plan's for a program error, 1 for the other errors a
    Python program raises (CUDA out of memory, NCCL, a missing library), none while it runs or succeeded."""
    if ending in (None, SUCCEEDED, STOPPED, FailureCategory.TIMEOUT):
        return 0 if ending == SUCCEEDED else None
    return plan.get("exit_code", 1) if ending == FailureCategory.EXIT_CODE else 1


# --- the lines ---------------------------------------------------------------------------------------------

def _vendor(run: Run) -> vendors.Vendor:
    """The vendor of the devices the run had: what its program prints (``Vendor.log``: its software stack, the
    collective library, the lines of each kind of failure, with ``{gpu}``, ``{total}``, ``{free}``, ``{used}``,
    ``{pci}`` filled in here) makes a simulated failure read as a real one would on that hardware, and be
    diagnosed by that vendor's rules."""
    return vendors.vendor_or_default(run.vendor)


def _stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}Z"


def _banner(run: Run, index: int) -> list[str]:
    node, gpus = run.nodes[min(index, len(run.nodes) - 1)], run.gpus_per_node
    lines = [f"gpuportal-sim: job {run.job_id} attempt {run.attempt}, pod {run.pod_name(index)} on {node} "
             f"({gpus} x {run.gpu_model})", f"image {run.image}", f"+ {run.command or '(image entrypoint)'}",
             f"{_vendor(run).log.stack}, {gpus} device(s) visible: "
             f"{_vendor(run).visible_devices}={','.join(map(str, range(gpus)))}"]
    if run.pod_count > 1:
        lines += [f"rendezvous: node rank {index} of {run.pod_count}, world size {run.pod_count * gpus}, "
                  f"master {run.nodes[0]}:29500", _vendor(run).log.library]
    if index == 0:
        lines.append("training starts")
    return lines


class _Progress:
    """Steps at a per-job rate; the loss falls towards a floor with a little noise of its own per step."""

    def __init__(self, run: Run):
        rng = random.Random(run.job_id)
        self.steps_per_minute = rng.randint(40, 400)
        self.batch = 32 * run.gpus_per_node * run.pod_count

    def step(self, minute: int) -> int:
        return minute * self.steps_per_minute

    def loss(self, step: int) -> float:
        noise = (step * 2654435761 % 1000) / 1000 - 0.5
        return 0.3 + 2.2 * math.exp(-step / (self.steps_per_minute * 45)) + noise * 0.04

    def line(self, minute: int) -> str:
        step = self.step(minute)
        speed = self.steps_per_minute * self.batch / 60 * (1 + ((step * 40503) % 61 - 30) / 1000)
        return f"step {step} loss {self.loss(step):.4f} {speed:.0f} samples/s"


def _traceback(where: str, *last: str) -> list[str]:
    return ["Traceback (most recent call last):", '  File "/workspace/train.py", line 214, in <module>',
            f"    {where}", *last]


#: What a Python program that exits with code 1 printed last, one picked per attempt: the frame it failed in and
#: its last lines (each one the failure diagnosis' signatures name; the last one only on NVIDIA's devices).
PROGRAM_ERRORS: tuple[tuple[str, ...], ...] = (
    ("from model import build_model", '  File "/workspace/model.py", line 9, in <module>',
     "    from flash_attn import FlashAttention",
     "ImportError: cannot import name 'FlashAttention' from 'flash_attn' "
     "(/usr/local/lib/python3.11/site-packages/flash_attn/__init__.py)"),
    ("import timm", "ModuleNotFoundError: No module named 'timm'"),
    ("dataset = load_dataset(args.data)", '  File "/workspace/data.py", line 41, in load_dataset',
     "    with open(os.path.join(root, \"index.json\")) as f:",
     "FileNotFoundError: [Errno 2] No such file or directory: '/data/imagenet/train/index.json'"),
    ("batch = collate(samples)", '  File "/workspace/data.py", line 77, in collate',
     '    labels = torch.tensor([s["label"] for s in samples])', "KeyError: 'label'"),
    ("loss = criterion(logits, labels)", "RuntimeError: CUDA error: device-side assert triggered",
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
     "be incorrect.", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"),
)


def _program_error(run: Run, step: int) -> list[str]:
    """What the program printed as it exited with ``run.exit_code`` (each code its own kind of error)."""
    code = run.exit_code
    if code == 2:
        return ["usage: train.py [-h] [--epochs EPOCHS] [--lr LR] [--batch-size BATCH_SIZE]",
                "train.py: error: unrecognized arguments: --warmup-ratio 0.1"]
    if code == 127:
        return ["evaluate.sh: line 12: sacrebleu: command not found"]
    if code == 139:
        return ["Fatal Python error: Segmentation fault", "",
                "Current thread 0x00007f3a2b7fe640 (most recent call first):",
                '  File "/workspace/data.py", line 88 in __getitem__', "Segmentation fault (core dumped)"]
    if code == 1:
        errors = PROGRAM_ERRORS if run.vendor == vendors.DEFAULT_VENDOR else PROGRAM_ERRORS[:-1]  # CUDA's own last
        where, *last = errors[random.Random(run.job_id * 7 + run.attempt).randrange(len(errors))]
        return _traceback(where, *last)
    return _traceback("trainer.check(loss)", f"RuntimeError: loss is NaN at step {step}; stopping (exit {code})")


def _ending(run: Run, index: int, step: int, loss: float, stamp: str) -> list[str]:
    """The lines pod ``index`` printed as the run ended (the failing pod is pod 0); ``stamp`` starts the
    lines its logger wrote."""
    ending, rank, gpu = run.ending, index * run.gpus_per_node, run.failing_gpu
    if ending == SUCCEEDED:
        if index != 0:
            return [f"{stamp} rank {rank}: done"]
        return [f"{stamp} training finished: {step} steps, final loss {loss:.4f}",
                f"{stamp} saved /data/out/job-{run.job_id}/model.pt"]
    if ending in (STOPPED, FailureCategory.TIMEOUT):
        return [f"{stamp} received SIGTERM at step {step}; exiting" if index == 0
                else f"{stamp} rank {rank}: received SIGTERM"]
    if ending == FailureCategory.COMMUNICATION:
        timeout_ms = max(round(WATCHDOG_SECONDS * 1000 * run.scale), 1)  # the hang, within the run
        hung_ms = round(min(WATCHDOG_SECONDS * run.scale, (run.stopped - run.started).total_seconds()) * 1000)
        return [*_vendor(run).log.comm,
                f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
                f"timeout: WorkNCCL(SeqNum={step * 3 + 1}, OpType=ALLREDUCE, NumelIn=16777216, NumelOut=16777216, "
                f"Timeout(ms)={timeout_ms}) ran for {hung_ms} milliseconds before timing out.",
                "terminate called after throwing an instance of 'c10::DistBackendError'"]
    if index != 0:  # the others are stopped by the launcher when pod 0 fails
        return [f"{stamp} rank {rank}: received SIGTERM from the launcher; exiting"]
    if ending == FailureCategory.OUT_OF_MEMORY:
        if run.exit_code == 137:  # the container's memory, not the GPU's: the kernel killed a loader worker
            return ["RuntimeError: DataLoader worker (pid 2311) is killed by signal: Killed."]
        total = run.gpu_memory_gib
        return _traceback("loss.backward()", _vendor(run).log.oom.format(
            gpu=gpu, total=f"{total:.2f}", free=f"{total * 0.012:.2f}", used=f"{total * 0.95:.2f}"))
    if ending == FailureCategory.IMAGE:
        return _traceback("import torch", _vendor(run).log.missing)
    if ending in (FailureCategory.NODE_FAULT, FailureCategory.GPU_FAULT):
        device_error = _traceback("loss.backward()", _vendor(run).log.device.format(gpu=gpu))
        if run.faulted:  # the node agent saw it; the program only sees its device fail
            return device_error
        return [_vendor(run).log.driver.format(gpu=gpu, pci=f"{0x18 + gpu * 0x10:02x}"), *device_error]
    return _program_error(run, step)


def pod_streams(run: Run, tail: int) -> dict[int, list[tuple[datetime, str]]]:
    """Each pod's last ``tail`` lines as ``(moment, text)``; a line the program's logger wrote starts with
    its time (UTC), a traceback's lines do not."""
    progress = _Progress(run)
    printing_until = run.simulated_seconds(run.stopped)
    if run.ending == FailureCategory.COMMUNICATION:
        printing_until -= WATCHDOG_SECONDS  # the last collective hung for the watchdog's whole timeout
    minutes = 0 if run.ending == FailureCategory.IMAGE else max(int(printing_until // PROGRESS_EVERY_SECONDS), 0)
    step = progress.step(minutes)
    streams = {}
    for index in range(run.pod_count):
        moments = [min(run.at(second), run.stopped) for second in range(8)]
        banner = [(moments[second], f"{_stamp(moments[second])} {text}")
                  for second, text in enumerate(_banner(run, index))]
        ending = []
        if run.ending is not None:
            ending = [(run.stopped, text)
                      for text in _ending(run, index, step, progress.loss(step), _stamp(run.stopped))]
        room = max(tail - len(ending), 0)
        shown = min(minutes, room) if index == 0 else 0
        lines = banner[max(len(banner) - (room - shown), 0):] if room > shown else []
        for minute in range(minutes - shown + 1, minutes + 1):
            moment = run.at(minute * PROGRESS_EVERY_SECONDS)
            lines.append((moment, f"{_stamp(moment)} {progress.line(minute)}"))
        streams[index] = (lines + ending)[-tail:]
    return streams
