"""The Slurm client's pure parts: hostlists, GRES strings, wait statuses, the JSON of each REST version."""

from datetime import UTC, datetime

from scheduling.executors.slurm.adapters import ADAPTERS, V0036, V0038, parse_gres, parse_gres_used, problems
from scheduling.executors.slurm.shapes import GresCount, SlurmJob, gpu_indices, hostlist


def test_hostlists_expand_in_order_and_keep_zero_padding():
    assert hostlist("sx-h100-[1-2],sx-a100-1") == ("sx-h100-1", "sx-h100-2", "sx-a100-1")
    assert hostlist("n[01-03,7]") == ("n01", "n02", "n03", "n7")
    assert hostlist("") == () and hostlist("(null)") == ()


def test_gres_strings_of_nodes_and_jobs():
    assert parse_gres("gpu:h100:8") == (GresCount("h100", 8),)
    assert parse_gres("gpu:4(S:0-1)") == (GresCount("", 4),)
    assert parse_gres_used("gpu:h100:3(IDX:0-1,4)") == {"h100": (0, 1, 4)}
    assert parse_gres_used("gpu:h100:0(IDX:N/A)") == {"h100": ()}
    assert gpu_indices("0-2,5") == (0, 1, 2, 5)


def job(raw_exit_code):
    return SlurmJob(1, "j", "FAILED", "", raw_exit_code, "u", "a", "p", (), {}, "", None, None, None, None, "")


def test_the_raw_wait_status_is_decoded():
    assert (job(768).exit_status, job(768).signal) == (3, None)
    assert (job(15).exit_status, job(15).signal) == (None, 15)
    assert (job(0).exit_status, job(0).signal) == (0, None)
    assert (job(None).exit_status, job(None).signal) == (None, None)


def test_newest_adapter_first_and_v0036_reads_a_drain_from_the_reason():
    assert next(iter(ADAPTERS)) == "v0.0.38"
    raw = {"name": "n1", "state": "idle", "reason": "fan", "gres": "gpu:a100:4", "cpus": 16, "real_memory": 1024}
    assert V0036().node(raw).flags == ("DRAIN",)
    assert V0036().node({**raw, "reason": ""}).flags == ()
    assert V0038().node({**raw, "state_flags": ["DRAIN"], "partitions": ["gpu"]}).partitions == ("gpu",)


def test_job_json_maps_to_the_shape():
    raw = {"job_id": 7, "job_state": "RUNNING", "state_reason": "None", "exit_code": 0, "nodes": "sx-h100-[1-2]",
           "gres_detail": ["gpu:h100:2(IDX:0-1)", "gpu:h100:2(IDX:4-5)"], "user_name": "daemon", "comment": "c",
           "submit_time": 1796428126, "start_time": 0, "time_limit": 5, "standard_output": "/o/%j"}
    found = V0038().job(raw)
    assert found.gpus_by_node == {"sx-h100-1": (0, 1), "sx-h100-2": (4, 5)}
    assert found.submit_time == datetime.fromtimestamp(1796428126, tz=UTC) and found.start_time is None
    assert found.time_limit_minutes == 5


def test_accounted_gpus_and_errors_of_every_spelling():
    record = V0038().accounted({"job_id": 3, "state": {"current": "COMPLETED", "reason": "None"},
                                "exit_code": {"status": "SUCCESS", "return_code": 0},
                                "tres": {"allocated": [{"type": "gres", "name": "gpu:a100", "count": 3}]},
                                "time": {"elapsed": 60}, "comment": {"job": "gpuportal job 1 attempt 1"}})
    assert (record.gpus, record.gpu_type, record.comment, record.elapsed_seconds) == (3, "a100",
                                                                                      "gpuportal job 1 attempt 1", 60)
    found = problems({"errors": [{"errno": -1, "error": "Unspecified error"}, {"error_code": 2014, "error": "x"}]})
    assert [p.number for p in found] == [-1, 2014]
