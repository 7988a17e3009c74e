"""The client's pure helpers: following a log from tail windows, error bodies as lines, tables, sizes."""

import argparse

from gpuportal_cli import explain, render
from gpuportal_cli.api import error_lines
from gpuportal_cli.commands import new_lines
from gpuportal_cli.main import build_parser


def test_following_a_log_prints_each_line_once():
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]  # window of 4, grew by 2
    assert new_lines(["a", "b", "c"], ["a", "b", "c"]) == []  # nothing new
    assert new_lines(["x", "x"], ["x", "x"]) == []  # repeated lines are not printed again
    assert new_lines(["a", "b"], ["c", "d"]) == ["c", "d"]  # grew by more than the window
    assert new_lines(["a", "b"], []) == []


def test_error_bodies_become_lines_naming_the_field():
    body = {"gpus_per_node": ["16 is too many."], "non_field_errors": ["Unknown project."],
            "placement": {"node": ["Required."]}}
    assert error_lines(body) == ["gpus_per_node: 16 is too many.", "Unknown project.", "placement.node: Required."]
    assert error_lines({"detail": "Not found."}) == ["Not found."]


def test_tables_and_sizes():
    assert render.table(["ID", "NAME"], [[1, "long-name"], [22, None]]).splitlines() == [
        "ID  NAME", "1   long-name", "22  -"]
    assert render.size({"nodes": 2, "gpus_per_node": 8, "gpu_model": "A100", "gpu_share": 1.0}) == "2 x 8 A100"
    assert render.size({"nodes": 1, "gpus_per_node": 1, "gpu_model": "L40S", "gpu_share": 0.25}) == \
        "1 x 1 x 0.25 L40S"


def test_a_failure_is_explained_with_its_evidence():
    job = {"id": 7, "name": "ddp", "nodes": 2, "gpus_per_node": 8, "gpu_model": "H100", "tenant": "nlp",
           "status": "failed", "exit_code": 1, "max_runtime_minutes": 60,
           "failure": {"category": "communication", "message": "NCCL timeout between nodes.", "node": "h100-02",
                       "advice": "Resubmit; the node was drained.",
                       "evidence": {"reason": "Error", "last_log_lines": ["step 10", "NCCL WARN timeout"]}}}
    assert explain.explain(job).splitlines() == [
        "Job 7 (ddp, 2 x 8 H100, tenant nlp) is failed.",
        "Why it failed: NCCL timeout between nodes. [communication]", "Exit code: 1", "Node: h100-02",
        "What to do: Resubmit; the node was drained.", "Evidence:", "  reason: Error", "  last_log_lines:",
        "    step 10", "    NCCL WARN timeout"]


def test_chinese_columns_line_up_in_a_terminal():
    text = render.table(["编号", "名称"], [[12, "训练"], [3, "eval"]])
    first, second, third = text.splitlines()
    # "编号" takes four terminal columns, like "12  " below it: the second column starts at the same place
    assert render.width(first[:first.index("名称")]) == render.width(second[:second.index("训练")]) == 6
    assert third == "3     eval"


def test_every_command_prints_its_help():
    """``--help`` of every command answers (the shared options' help once broke it for all of them)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(commands) >= 15
    for name, command in commands.items():
        text = command.format_help()
        assert name in text and "--timeout" in text
