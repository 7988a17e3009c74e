"""What the last lines of a failed program's log say about why it stopped: one table of signatures.

A program that exits with code 1 has told why in its last lines (a Python traceback's final line, the CUDA
runtime's error, a shell's "command not found"), and the exit code alone says nothing. The diagnosis
(``kubernetes/diagnosis.py``, for every executor) reads the vendors' words first (``fleet/vendors.py``: a
missing runtime library, a device fault, device out of memory, a cross-node collective failure); what is left,
it reads here. Each :class:`Signature` is data: a pattern whose named groups fill its sentences, the
``FailureCategory`` it belongs to, the cause and the next step as message ids (stored as phrases, read in the
reader's language). Order is priority: the first signature that matches any line of the tail wins (the root
cause before what it set off: a missing file before the ``RuntimeError`` raised while handling it, a Python
error before the launcher's summary of it), and of its lines, the last one. Only where no line is recognised
does the diagnosis fall back to the exit code, with :data:`EXIT_CODES` saying what a well-known one means.

The patterns read one line at a time, after :data:`PREFIX` (what launchers put before a rank's output) is taken
off; they anchor where a program's own text could otherwise look alike, so that a progress line, an
``INFO`` line or a warning never matches (the tests hold lines that must not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.translation import gettext_noop

from scheduling.models import FailureCategory

#: What torchrun, DeepSpeed, MPI launchers and the portal's merged log put before a line of a rank's output.
PREFIX = re.compile(r"^(?:\[(?:pod \d+|rank\d+|default\d+|\d+,\d+)\](?:<std(?:out|err)>)?:?\s*|\d+:\s+)*")
#: The longest detail taken from a line into a sentence (the whole line is kept as evidence).
DETAIL_CHARS = 160
#: Launchers' wrapper exceptions: they restate a rank's failure, never its cause.
_WRAPPERS = r"(?!(?:[\w.]+\.)?(?:ChildFailedError|CalledProcessError|SystemExit|KeyboardInterrupt)\b)"
#: A Python exception's final line: a (dotted) class name ending like an error's, then ": detail" or nothing.
_EXCEPTION = r"(?P<exception>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure))"


@dataclass(frozen=True)
class Signature:
    """One kind of last words: ``pattern`` (its named groups are the sentences' parameters), the category, the
    cause (what happened, for the job's failure message) and the next step, both message ids."""

    key: str
    pattern: re.Pattern
    category: str
    cause: str
    advice: str
    #: Only among the log's last ``within`` lines (0: anywhere in the tail): what a program may also print and
    #: survive (an exception it caught and logged) is its cause only where the log ends.
    within: int = 0


def _sig(key: str, pattern: str, category: str, cause: str, advice: str, within: int = 0) -> Signature:
    return Signature(key, re.compile(pattern), category, cause, advice, within)


#: How near the end a generic last word must be (a traceback's final line, then a launcher's few lines).
_AT_THE_END = 12


_PROGRAM, _ENV, _OOM = FailureCategory.EXIT_CODE, FailureCategory.IMAGE, FailureCategory.OUT_OF_MEMORY
_FIX = gettext_noop("Read the traceback above it in the log (it names the file and line); fix the program and "
                    "submit again.")

#: The signatures, in the order they are tried (see the module's docstring).
SIGNATURES: tuple[Signature, ...] = (
    # --- the image and the command --------------------------------------------------------------------------
    _sig("exec_format", r"exec (?P<path>\S+): exec format error|exec format error", _ENV,
         gettext_noop("The image was built for another processor architecture: its programs cannot run on these "
                      "nodes (exec format error)."),
         gettext_noop("Use an image built for the nodes' architecture (linux/amd64 on most GPU nodes).")),
    _sig("module_missing", r"ModuleNotFoundError: No module named '(?P<module>[^']+)'", _PROGRAM,
         gettext_noop("The program stopped at an import: the Python module %(module)s is not installed in the "
                      "image (ModuleNotFoundError)."),
         gettext_noop("Install the package that provides %(module)s in the image (or use an image that has it), "
                      "then submit again.")),
    _sig("import_name", r"ImportError: cannot import name '(?P<name>[^']+)' from '(?P<module>[^']+)'", _PROGRAM,
         gettext_noop("The program stopped at an import: the installed %(module)s has no %(name)s (ImportError)."),
         gettext_noop("The image holds a version of %(module)s without %(name)s: pin the version the code needs "
                      "in the image (pip show %(module)s says which one it has), or change the import.")),
    _sig("import_error", r"^ImportError: (?P<detail>.+)", _PROGRAM,
         gettext_noop("The program stopped at an import: %(detail)s (ImportError)."),
         gettext_noop("A package in the image is missing or of another version than the code expects: install "
                      "the versions it needs in the image, then submit again.")),
    _sig("script_missing", r"can't open file '(?P<path>[^']+)': \[Errno 2\] No such file or directory", _PROGRAM,
         gettext_noop("Python could not start the program: the script %(path)s does not exist in the container."),
         gettext_noop("Check the script's path in the job's command: the image's working directory, or the "
                      "volume that should hold it, may differ.")),
    _sig("file_missing", r"\[Errno 2\] No such file or directory: '(?P<path>[^']+)'|"
                         r"^(?:\S+: )?(?:(?:line )?\d+: )?(?P<file>/\S+): No such file or directory$", _PROGRAM,
         gettext_noop("The program stopped because a file or folder it opens does not exist: %(path)s%(file)s."),
         gettext_noop("Check the path in the job's command and settings, and that the volume holding it is "
                      "mounted in the job and spelled the same.")),
    _sig("permission", r"PermissionError: \[Errno 13\] Permission denied: '(?P<path>[^']+)'|"
                       r"^(?:\S+: )?(?:(?:line )?\d+: )?(?P<file>/\S+): Permission denied$", _PROGRAM,
         gettext_noop("The program was refused access to %(path)s%(file)s (permission denied)."),
         gettext_noop("The container's user may not read or write it: write to /tmp or a volume the job may "
                      "write to, or fix the file's owner and mode in the image.")),
    _sig("command_missing", r"(?P<command>[\w./+-]+): command not found$|"
                            r"exec: \"(?P<exec>[^\"]+)\": executable file not found", _PROGRAM,
         gettext_noop("The program could not run %(command)s%(exec)s: the command does not exist in the image "
                      "(command not found)."),
         gettext_noop("Install it in the image or call it by its full path; check its spelling in the job's "
                      "command.")),
    _sig("usage", r"^(?P<program>[\w./-]+): error: (?P<detail>(?:unrecognized|the following|argument|invalid).*)",
         _PROGRAM,
         gettext_noop("The program refused its arguments: %(detail)s."),
         gettext_noop("Check the job's command against the program's usage (the line above it in the log), "
                      "then submit again.")),
    # --- the node's memory --------------------------------------------------------------------------------
    _sig("loader_killed", r"DataLoader worker \(pid \d+\) is killed by signal: Killed", _OOM,
         gettext_noop("The node's memory ran out: the kernel killed a data loader worker (not the GPU's memory)."),
         gettext_noop("Use fewer data loader workers (num_workers) or a smaller prefetch, or ask for more memory "
                      "per node.")),
    _sig("killed", r"^Killed$|^(?:\S+: )?line \d+: +\d+ Killed\b|Out of memory: Killed process|oom-kill", _OOM,
         gettext_noop("The node's memory ran out: the kernel killed the program (not the GPU's memory)."),
         gettext_noop("Ask for more memory per node, or load less at once (smaller batches, fewer data loader "
                      "workers).")),
    # --- the devices: what is not a fault of the device (a fault or out of memory: the vendors' words) ------
    _sig("device_assert", r"device-side assert(?:ion)? triggered", _PROGRAM,
         gettext_noop("The program failed a check inside a GPU kernel (device-side assert): most often an index "
                      "out of range, such as a label beyond the number of classes."),
         gettext_noop("Run it again with CUDA_LAUNCH_BLOCKING=1 to see the operation that failed, and check "
                      "labels and indices against the sizes they index.")),
    _sig("illegal_access", r"(?P<runtime>CUDA|HIP) error: an illegal memory access was encountered|"
                           r"cudaErrorIllegalAddress", _PROGRAM,
         gettext_noop("A GPU kernel accessed memory outside what it was given (illegal memory access)."),
         gettext_noop("Usually a custom or compiled kernel, or an extension built for another version: run it "
                      "again with CUDA_LAUNCH_BLOCKING=1 to see the operation, and rebuild extensions for the "
                      "image's versions.")),
    _sig("no_device", r"no CUDA-capable device is detected|No CUDA GPUs are available|"
                      r"Found no NVIDIA driver on your system", _ENV,
         gettext_noop("The program found no GPU in its container."),
         gettext_noop("Keep CUDA_VISIBLE_DEVICES as the portal sets it (do not set it in the command), and use an "
                      "image whose CUDA runtime matches the nodes' driver.")),
    _sig("driver_too_old", r"driver version is insufficient for CUDA runtime version|"
                           r"The NVIDIA driver on your system is too old", _ENV,
         gettext_noop("The image's CUDA runtime is newer than the nodes' driver supports."),
         gettext_noop("Use an image built for an older CUDA (the driver's version is in the node's inventory), or "
                      "ask the platform admins which CUDA these nodes support.")),
    _sig("collective_timeout", r"Watchdog caught collective operation timeout|"
                               r"(?P<library>NCCL|RCCL|HCCL|CNCL)\b.*\b(?:timed out|timeout)\b", _PROGRAM,
         gettext_noop("A collective operation between the job's GPUs timed out: one rank stopped or waited on "
                      "another operation while the others kept waiting."),
         gettext_noop("Find the rank that stopped first in the log above; check that every rank runs the same "
                      "collective calls in the same order, and set NCCL_DEBUG=INFO to see more.")),
    _sig("collective_error", r"(?P<library>NCCL|RCCL|CNCL) (?:WARN|ERROR)\b|unhandled system error|"
                             r"ncclSystemError|ncclUnhandledCudaError|ncclInternalError", _PROGRAM,
         gettext_noop("The collective library failed between the GPUs of the node (NCCL or its peer)."),
         gettext_noop("Often too little shared memory for its buffers: use a larger /dev/shm (the job's shared "
                      "memory) or set NCCL_SHM_DISABLE=1; NCCL_DEBUG=INFO prints the reason.")),
    # --- vendors' runtimes: error codes no vendor record names as a fault or out of memory ------------------
    _sig("level_zero_oom", r"\b(?P<code>(?:ZE|UR)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)\b|XPU out of memory", _OOM,
         gettext_noop("The Intel GPU ran out of memory (Level Zero)."),
         gettext_noop("Reduce the batch size, use gradient checkpointing or mixed precision, or a device with more "
                      "memory.")),
    _sig("level_zero_lost", r"\b(?P<code>ZE_RESULT_ERROR_DEVICE_LOST)\b", FailureCategory.GPU_FAULT,
         gettext_noop("The Intel GPU was lost under the job (Level Zero: device lost)."),
         gettext_noop("Nothing to fix in the job: it is retried automatically without that node.")),
    _sig("level_zero", r"\b(?P<code>(?:ZE|UR)_RESULT_ERROR_[A-Z_]+)\b", _PROGRAM,
         gettext_noop("The Intel GPU runtime (Level Zero) returned %(code)s."),
         gettext_noop("Check that the image's oneAPI and PyTorch XPU versions match the nodes' driver; the lines "
                      "above it name the operation.")),
    _sig("cann_code", r"\b(?P<code>E[ZEHIJKL]\d{4})\b|\b(?P<acl>ACL_ERROR_[A-Z_]+)\b", _PROGRAM,
         gettext_noop("The Ascend runtime (CANN) reported error %(code)s%(acl)s."),
         gettext_noop("The lines above it name the operator; check that the image's torch_npu and CANN versions "
                      "match the nodes' driver, and set ASCEND_GLOBAL_LOG_LEVEL=1 for details.")),
    _sig("cnrt", r"\b(?P<code>CNRT_RET_ERR_[A-Z_]+|cnrtError\w+|CNNL_STATUS_[A-Z_]+|CN_ERROR_[A-Z_]+)\b", _PROGRAM,
         gettext_noop("The Cambricon runtime returned %(code)s."),
         gettext_noop("Check that the image's torch_mlu and Neuware versions match the nodes' driver; cnmon shows "
                      "the devices' state.")),
    _sig("hip", r"HIP error: (?P<detail>.+)|\b(?P<code>hipError\w+)\b", _PROGRAM,
         gettext_noop("The ROCm runtime (HIP) returned an error: %(detail)s%(code)s."),
         gettext_noop("Check that the image's ROCm version matches the nodes' driver; run again with "
                      "AMD_SERIALIZE_KERNEL=3 to see the operation that failed.")),
    _sig("cuda", r"CUDA error: (?P<detail>.+)|\b(?P<code>CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+|"
                 r"cudaError\w+)\b", _PROGRAM,
         gettext_noop("The CUDA runtime returned an error: %(detail)s%(code)s."),
         gettext_noop("Run it again with CUDA_LAUNCH_BLOCKING=1 to see the operation that failed; check that "
                      "the image's CUDA and PyTorch versions match the nodes' driver.")),
    # --- crashes and the program's own errors, last: they often follow one of the above -------------------
    _sig("segfault", r"Segmentation fault|\bSIGSEGV\b", _PROGRAM,
         gettext_noop("The program crashed with a segmentation fault: native code accessed memory it does not "
                      "own."),
         gettext_noop("Usually a native extension built for another Python, PyTorch or CUDA version, or a data "
                      "loader worker: rebuild extensions for the image's versions and try num_workers=0.")),
    _sig("cpp_exception", r"terminate called after throwing an instance of '(?P<type>[^']+)'", _PROGRAM,
         gettext_noop("The program aborted on an uncaught C++ exception (%(type)s)."),
         gettext_noop("The lines above it say what raised it; fix the cause and submit again."), _AT_THE_END),
    _sig("python_exception", rf"^{_WRAPPERS}{_EXCEPTION}: *(?P<detail>\S.*)$", _PROGRAM,
         gettext_noop("The program stopped on an uncaught %(exception)s: %(detail)s."), _FIX, _AT_THE_END),
    _sig("python_exception_bare", rf"^{_WRAPPERS}{_EXCEPTION}:?$", _PROGRAM,
         gettext_noop("The program stopped on an uncaught %(exception)s."), _FIX, _AT_THE_END),
)

#: What a well-known exit code means (128 + a signal's number: the signal that ended the program).
EXIT_CODES: dict[int, str] = {
    2: gettext_noop("a wrong use of a command or its arguments"),
    126: gettext_noop("the command is not executable"),
    127: gettext_noop("the command was not found"),
    134: gettext_noop("the program aborted (SIGABRT)"),
    137: gettext_noop("the program was killed (SIGKILL), most often because its memory ran out"),
    139: gettext_noop("the program crashed with a segmentation fault (SIGSEGV)"),
    143: gettext_noop("the program was stopped (SIGTERM)"),
}


@dataclass(frozen=True)
class Recognised:
    """The signature the log matched, its decisive line (as the log has it) and the sentences' parameters."""

    signature: Signature
    line: str
    params: dict[str, str]


def recognise(lines: list[str] | tuple[str, ...]) -> Recognised | None:
    """The first signature (in table order) that a line of ``lines`` matches, with the last such line."""
    cleaned = [(line.strip(), PREFIX.sub("", line.strip())) for line in lines]
    while cleaned and not cleaned[-1][0]:  # blank lines at the end say nothing
        cleaned.pop()
    for signature in SIGNATURES:
        for line, text in reversed(cleaned[-signature.within:] if signature.within else cleaned):
            match = signature.pattern.search(text)
            if match:
                params = {name: _short(value or "") for name, value in match.groupdict().items()}
                return Recognised(signature, line, params)
    return None


def _short(text: str) -> str:
    text = text.strip().rstrip(".")
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"
