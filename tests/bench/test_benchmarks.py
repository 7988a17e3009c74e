"""Every benchmark runs here at a tiny size, so none can rot: each must finish and print its JSON figures, twice
in a row on the same database (a benchmark cleans up only what it may and never trips on what it left)."""

import io
import json

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)


def run(command: str, *args) -> dict:
    """Run the benchmark twice on the same database; the second run's figures."""
    for _ in range(2):
        out = io.StringIO()
        call_command(command, *args, stdout=out)
        figures = json.loads(out.getvalue())
    return figures


def test_bench_scheduler():
    figures = run("bench_scheduler", "--nodes", "12", "--tenants", "3", "--pending", "40", "--running", "10",
                  "--runs", "1")
    assert figures["pending"] == 40 and figures["db_pass_seconds"] > 0 and figures["db_waiting"] > 0
    assert figures["db_pass_cold_seconds"] > 0 and figures["max_rss_mib"] > 0 and figures["engine_moving_seconds"] > 0
    assert 0 < figures["db_rows_read_again"][0] < figures["pending"]  # the moving pass read only what changed


def test_bench_poll():
    figures = run("bench_poll", "--agents", "3", "--gpus", "2", "--processes", "1", "--cycles", "1")
    assert figures["answered"] == 3 and figures["cycle_seconds"] > 0


def test_bench_dispatch():
    figures = run("bench_dispatch", "--jobs", "6", "--tenants", "2", "--workers", "2")
    assert figures["dispatched"] == 6 and figures["failed"] == 0 and figures["jobs_running"] == 6


def test_bench_rollup():
    figures = run("bench_rollup", "--samples", "3000", "--gpus", "16", "--tenants", "2", "--repeat", "1")
    assert 0 < figures["samples"] <= 3000 and figures["daily_rows"] > 0 and figures["report_page_ms"] > 0


def test_bench_efficiency():
    figures = run("bench_efficiency", "--gpus", "8", "--days", "0.25", "--interval", "60")
    assert figures["readings"] == 8 * 6 * 60 and figures["page_seconds"] > 0 and figures["same_figures"]
    assert figures["most_gpus_working"] == 2 and figures["points_per_gpu"] <= 360


def test_bench_submit():
    figures = run("bench_submit", "--array", "60", "--batch", "50", "--singles", "3", "--nodes", "2")
    assert figures["array_stored"] == 60 and figures["batch_stored"] == 50
    assert figures["array_admitted"] == figures["batch_admitted"] == 16  # the 16 GPUs of the two nodes
    assert figures["array_store_seconds"] > 0 and figures["single_p50_ms"] <= figures["single_p95_ms"]
    assert figures["array_requests"] == figures["batch_requests"] == 0


def test_bench_submit_of_a_task_type_that_needs_approval():
    figures = run("bench_submit", "--array", "30", "--batch", "5", "--singles", "2", "--nodes", "1", "--approval")
    assert figures["array_stored"] == 30 and figures["array_requests"] == 1  # the tasks share one request
    assert figures["batch_requests"] == 5 and figures["array_admitted"] == figures["batch_admitted"] == 0


def test_replay_trace(tmp_path):
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"node-{i},64000,262144,8,V100\n" for i in range(4)))
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                    "scheduled_time\n" + "".join(
                        f"pod-{i},4000,8192,{1 + i % 4},1000,,LS,Succeeded,{i * 60},{i * 60 + 3600},{i * 60}\n"
                        for i in range(30)))
    figures = run("replay_trace", "--nodes", str(nodes), "--pods", str(pods), "--node-fraction", "1",
                  "--time-scale", "0.001", "--eta-range", "0.25,2,900")
    assert figures["jobs"] == 30
    for key in ("eta_range_coverage", "eta_range_median_width_hours", "eta_range_unknown_share"):
        assert key in figures


def test_bench_portal():
    """Once, with --churn: the pages at rest and then with the cluster moving, on one portal (starting the stack is
    most of this test's time; the seed's rerun on the same database is the same get-or-create as the other
    benchmarks' fixtures)."""
    out = io.StringIO()
    call_command("bench_portal", "--clients", "2", "--seconds", "2.2", "--jobs", "20", "--web-workers", "1",
                 "--churn", "--churn-rate", "5", stdout=out)
    figures = json.loads(out.getvalue())
    names = ["dashboard", "job_list", "job_list_shaped", "job_list_live", "job_page", "api_job_list", "api_submit"]
    assert [page["name"] for page in figures["at_rest"]] == [page["name"] for page in figures["pages"]] == names
    assert figures["floor"]["name"] == "login_form" and not figures["skipped"]
    for page in [figures["floor"], *figures["at_rest"], *figures["pages"]]:
        assert page["errors"] == 0 and page["rps"] > 0 and page["p50_ms"] <= page["p95_ms"] <= page["max_ms"]
        assert page["web_cpu_ms"] >= 0  # CPU is counted in clock ticks: a short page may show none
    assert figures["churn"]["submitted"] > 0 and figures["churn"]["refused"] == 0


def test_bench_what_if(tmp_path):
    """A demo month (two days of history seeded: the last closed month may hold no job) and a tiny trace "month"."""
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"node-{i},64000,262144,8,V100\n" for i in range(4)))
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                    "scheduled_time\n" + "".join(
                        f"pod-{i},4000,8192,{1 + i % 8},1000,,LS,Succeeded,{i * 600},{i * 600 + 36000},{i * 600}\n"
                        for i in range(40)))
    figures = run("bench_what_if", "--demo", "--history-days", "2", "--openb", "--nodes", str(nodes), "--pods",
                  str(pods), "--gpus", "32", "--days", "1", "--add", "8")
    trace = figures["openb"]
    assert trace["jobs"] == 40 and trace["gpus"] == 32 and trace["added"] == {"V100": 8}
    assert trace["seconds"] > 0 and trace["passes"] > 0
    # 40 jobs of 1-8 GPUs for ten hours each, arriving over a day on 32 GPUs: some wait, and 8 more GPUs help
    assert trace["changed_p95_wait_seconds"] <= trace["baseline_p95_wait_seconds"]
    assert figures["demo"]["seconds"] > 0 and "month" in figures["demo"]
