"""The signatures of a failed program's last log lines: each with a realistic tail, lines that must not match,
the order that finds the root cause, and the diagnosis that names it (cause, next step, the line as evidence)
in English and in Chinese; only an unrecognised log falls back to the exit code."""

import re

import pytest
from django.utils import translation

from scheduling.executors import signatures
from scheduling.executors.failures import read_diagnosis
from scheduling.executors.kubernetes.diagnosis import PodState, diagnose
from scheduling.models import FailureCategory

CHINESE = re.compile(r"[\u4e00-\u9fff]")
TRACEBACK = ["Traceback (most recent call last):", '  File "/workspace/train.py", line 214, in <module>',
             "    main()"]
PROGRESS = ["2026-12-04T10:00:00Z step 1200 loss 0.4213 5120 samples/s"]

#: (key, the log's last lines, category, words the cause says)
CASES = [
    ("exec_format", ["exec /usr/bin/python3: exec format error"], "image", "architecture"),
    ("module_missing", [*TRACEBACK, "ModuleNotFoundError: No module named 'timm'"], "exit_code", "timm"),
    ("import_name", [*TRACEBACK, "ImportError: cannot import name 'FlashAttention' from 'flash_attn' "
                                 "(/usr/local/lib/python3.11/site-packages/flash_attn/__init__.py)"], "exit_code",
     "flash_attn has no FlashAttention"),
    ("import_error", [*TRACEBACK, "ImportError: numpy.core.multiarray failed to import"], "exit_code",
     "numpy.core.multiarray failed to import"),
    ("script_missing", ["python: can't open file '/workspace/trian.py': [Errno 2] No such file or directory"],
     "exit_code", "/workspace/trian.py"),
    ("file_missing", [*TRACEBACK, "FileNotFoundError: [Errno 2] No such file or directory: "
                                  "'/data/imagenet/train/index.json'"], "exit_code", "/data/imagenet/train/index.json"),
    ("file_missing", ["bash: /workspace/run.sh: No such file or directory"], "exit_code", "/workspace/run.sh"),
    ("permission", [*TRACEBACK, "PermissionError: [Errno 13] Permission denied: '/data/shared/out'"], "exit_code",
     "/data/shared/out"),
    ("permission", ["/bin/sh: 1: /workspace/run.sh: Permission denied"], "exit_code", "/workspace/run.sh"),
    ("command_missing", ["evaluate.sh: line 12: sacrebleu: command not found"], "exit_code", "sacrebleu"),
    ("command_missing", ['exec: "deepspeed": executable file not found in $PATH'], "exit_code", "deepspeed"),
    ("usage", ["usage: train.py [-h] [--lr LR]", "train.py: error: unrecognized arguments: --warmup-ratio 0.1"],
     "exit_code", "--warmup-ratio 0.1"),
    ("loader_killed", [*TRACEBACK, "RuntimeError: DataLoader worker (pid 2311) is killed by signal: Killed."],
     "out_of_memory", "data loader worker"),
    ("killed", [*PROGRESS, "Killed"], "out_of_memory", "node's memory"),
    ("device_assert", ["../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: "
                       "[0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
                       *TRACEBACK, "RuntimeError: CUDA error: device-side assert triggered",
                       "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"], "exit_code", "device-side assert"),
    ("illegal_access", [*TRACEBACK, "RuntimeError: CUDA error: an illegal memory access was encountered"],
     "exit_code", "illegal memory access"),
    ("no_device", [*TRACEBACK, "RuntimeError: No CUDA GPUs are available"], "image", "no GPU"),
    ("driver_too_old", [*TRACEBACK, "RuntimeError: The NVIDIA driver on your system is too old (found version "
                                    "11040)."], "image", "newer than"),
    ("collective_timeout", ["[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
                            "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 1800000 milliseconds before "
                            "timing out."], "exit_code", "timed out"),
    ("collective_error", ["node-1:2231:2290 [0] NCCL WARN Error while creating shared memory segment "
                          "/dev/shm/nccl-xyz (size 9637888)", *TRACEBACK,
                          "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
                          "system error"], "exit_code", "collective library"),
    ("level_zero_oom", [*TRACEBACK, "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"], "out_of_memory",
     "Intel GPU"),
    ("level_zero_lost", ["RuntimeError: level_zero backend failed with error: 20 (ZE_RESULT_ERROR_DEVICE_LOST)"],
     "gpu_fault", "Intel GPU"),
    ("level_zero", ["RuntimeError: ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"], "exit_code",
     "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"),
    ("cann_code", ["[ERROR] RUNTIME(2231,python):2026-12-04-10:00:00.000.000 [kernel_task.cc:1] EZ9999: Inner "
                   "Error!", "EZ9999  The error from device(chipId:0, dieId:0), serial number is 3"], "exit_code",
     "EZ9999"),
    ("cann_code", [*TRACEBACK, "RuntimeError: ACL_ERROR_RT_AICORE_EXCEPTION: aicore exception"], "exit_code",
     "ACL_ERROR_RT_AICORE_EXCEPTION"),
    ("cnrt", ["[CNRT ERROR] cnrtQueueSync: CNRT_RET_ERR_INVALID_HANDLE"], "exit_code", "CNRT_RET_ERR_INVALID_HANDLE"),
    ("hip", [*TRACEBACK, "RuntimeError: HIP error: invalid device function"], "exit_code", "invalid device function"),
    ("cuda", [*TRACEBACK, "RuntimeError: CUDA error: misaligned address"], "exit_code", "misaligned address"),
    ("cuda", [*TRACEBACK, "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"], "exit_code",
     "CUDNN_STATUS_NOT_SUPPORTED"),
    ("segfault", ["Fatal Python error: Segmentation fault", "", "Current thread 0x00007f3a2b7fe640 (most recent "
                  "call first):", '  File "/workspace/data.py", line 88 in __getitem__',
                  "Segmentation fault (core dumped)"], "exit_code", "segmentation fault"),
    ("cpp_exception", ["terminate called after throwing an instance of 'std::runtime_error'", "  what():  boom"],
     "exit_code", "std::runtime_error"),
    ("python_exception", [*TRACEBACK, "    batch = collate(samples)", "KeyError: 'label'"], "exit_code",
     "KeyError: 'label'"),
    ("python_exception", ["[rank0]: Traceback (most recent call last):", "[rank0]:   File \"train.py\", line 9",
                          "[rank0]: ValueError: loss is NaN at step 1200"], "exit_code", "ValueError"),
    ("python_exception_bare", [*TRACEBACK, "StopIteration", "AssertionError"], "exit_code", "AssertionError"),
]

#: Lines a healthy or merely chatty program prints: none may be taken for a failure.
NOT_FAILURES = [
    "2026-12-04T10:00:00Z step 1200 loss 0.4213 5120 samples/s",
    "NCCL INFO NCCL version 2.21.5+cuda12.4",
    "UserWarning: TypedStorage is deprecated. It will be removed in the future",
    "/usr/lib/python3/site-packages/torch/utils/data.py:558: UserWarning: This DataLoader will create 16 workers",
    "INFO: no KeyError seen in 100 batches; ValueError handling enabled",
    "epoch 3: val accuracy 0.912, errors 0",
    "Killed 3 zombie processes before start",
    "checking /data/imagenet: 1281167 files",
    "rendezvous: node rank 0 of 2, world size 16, master node-1:29500",
    "training finished: 50000 steps, final loss 0.3012",
    "Error: 0 warnings",
    "torch 2.4.0+cu124, 8 device(s) visible: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
    "Model EE1000X loaded",  # a CANN code only as a word of its own
]


@pytest.mark.parametrize(("key", "tail", "category", "words"), CASES)
def test_each_signature_names_its_cause_from_a_realistic_tail(key, tail, category, words):
    found = signatures.recognise([*PROGRESS, *tail])
    assert found is not None and found.signature.key == key, found
    assert found.signature.category == category
    assert words in found.signature.cause % found.params + " " + found.line


@pytest.mark.parametrize("line", NOT_FAILURES)
def test_ordinary_lines_are_not_failures(line):
    assert signatures.recognise([line]) is None


def test_every_signature_has_a_case_and_its_sentences_fit_its_parameters():
    assert {s.key for s in signatures.SIGNATURES} == {key for key, *_rest in CASES}
    for signature in signatures.SIGNATURES:
        params = dict.fromkeys(signature.pattern.groupindex, "x")
        assert signature.cause % params and signature.advice % params  # no parameter its pattern lacks
        assert signature.category in FailureCategory.values


def test_the_root_cause_wins_over_what_it_set_off_and_the_launchers_summary():
    tail = [*TRACEBACK, "FileNotFoundError: [Errno 2] No such file or directory: '/data/x.json'", "",
            "During handling of the above exception, another exception occurred:", "",
            *TRACEBACK, "RuntimeError: could not load the dataset",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "train.py FAILED"]
    found = signatures.recognise(tail)
    assert (found.signature.key, found.params["path"]) == ("file_missing", "/data/x.json")
    assert signatures.recognise(["subprocess.CalledProcessError: Command '['make']' returned non-zero exit status "
                                 "2."]) is None


def test_an_exception_the_program_logged_and_survived_is_not_its_cause():
    survived = [*TRACEBACK, "ValueError: bad sample 17, skipped", *PROGRESS * 20]
    assert signatures.recognise(survived) is None
    assert signatures.recognise([*survived, *TRACEBACK, "KeyError: 'label'"]).params["detail"] == "'label'"


def _failed_pod(code=1, **kwargs):
    return PodState("train-0", node="node-3", phase="Failed", exit_code=code, terminated_reason="Error", **kwargs)


def test_the_diagnosis_quotes_the_decisive_line_and_falls_back_to_the_exit_code_only_without_one():
    log = "\n".join([*PROGRESS, *TRACEBACK, "ImportError: cannot import name 'FlashAttention' from 'flash_attn' "
                                            "(/x/__init__.py)"])
    found = diagnose([_failed_pod()], logs={"train-0": log})
    assert (found.category, found.exit_code, found.node) == ("exit_code", 1, "node-3")
    assert found.message == "The program stopped at an import: the installed flash_attn has no FlashAttention " \
                            "(ImportError)."
    assert "pip show flash_attn" in found.advice and "exited with code" not in found.message
    assert found.evidence["log_line"].startswith("ImportError: cannot import name 'FlashAttention'")
    assert found.evidence["signature"] == "import_name" and "condition" not in found.evidence
    plain = diagnose([_failed_pod(139)], logs={"train-0": "\n".join(PROGRESS)})
    assert plain.message == "The program exited with code 139: the program crashed with a segmentation fault " \
                            "(SIGSEGV)."
    assert diagnose([_failed_pod(3)], logs={}).message == "The program exited with code 3."


def test_vendor_words_still_come_first():
    log = "\n".join([*TRACEBACK, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
    assert diagnose([_failed_pod()], logs={"train-0": log}).category == "out_of_memory"


def test_a_diagnosis_reads_in_the_readers_language_with_its_evidence_in_words():
    log = "\n".join([*TRACEBACK, "ModuleNotFoundError: No module named 'timm'"])
    stored = diagnose([_failed_pod()], logs={"train-0": log},
                      conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                   "message": "Job has reached the specified backoff limit"}]).as_dict()
    english = read_diagnosis(stored, stored["message"])
    assert english.message == stored["message"] and "timm" in english.advice
    assert english.log_line == "ModuleNotFoundError: No module named 'timm'"
    assert "Pod <code>train-0</code>: its container exited with an error." in english.facts  # the name as code
    assert any("its pod failed and no retry was left" in fact for fact in english.facts)
    assert not any("{" in fact or "condition:" in fact for fact in english.facts)  # no raw dictionaries
    with translation.override("zh-hans"):
        chinese = read_diagnosis(stored, stored["message"])
        facts = read_diagnosis(stored, stored["message"]).facts
    assert CHINESE.search(chinese.message) and "timm" in chinese.message and CHINESE.search(chinese.advice)
    assert all(CHINESE.search(fact) for fact in facts)
    # a sentence replaced after the diagnosis is shown as stored, never as the phrase of another one
    assert read_diagnosis(stored, "Failed for good by the pass.").message == "Failed for good by the pass."
