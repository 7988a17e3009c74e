"""The device check: the agent's NVML readings against ``nvidia-smi -q -x`` on the same machine.

The agent's NVIDIA backend is tested every day against a simulation of NVML (``fake_nvml``); only a machine
with a real GPU tells whether NVML's real answers mean what the simulation assumes (units, rounding, which
calls a driver refuses). On such a machine ``scripts/device-check.sh`` starts the agent's NVML backend, takes
a snapshot, runs ``nvidia-smi -q -x``, takes a second snapshot, and compares them field by field: GPU count,
product names, UUIDs, memory total and used, utilisation, temperature, power draw and limit, ECC mode and
volatile error counts, driver and CUDA versions, MIG mode. It then times a snapshot (the median of N) and
writes what it found as JSON (stdout) and as a page (``docs/device-check.md``).

Identities and settings must be equal. Live readings move between two calls, so a live value passes when it lies
between the two snapshots' values, widened by the tolerance given for it in :data:`LIVE`: the readings were not
taken at the same instant, and must not fail for that. ``nvidia-smi``'s memory "used" leaves out the memory the
driver reserves, which NVML's counts, so its tolerance includes the reserved amount.

Like the rest of the agent it needs the standard library and ``nvidia-ml-py`` only. ``--simulate N`` with
``--smi-xml FILE`` runs the same comparison on the simulated NVML and a recorded answer (how the tests run it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from .agent import Agent
from .backends import make_backend
from .system import SimulatedHostSampler

#: Live readings and how far apart the agent and ``nvidia-smi`` may be beyond the two snapshots' range:
#: (field, absolute tolerance, tolerance as a share of the agent's value).
LIVE = (("memory_used_mb", 16, 0.01), ("utilization_gpu", 15, 0.0), ("temperature_c", 3, 0.0),
        ("power_w", 15, 0.10))
#: Identities and settings, equal on both sides (memory total and power limit to their unit's rounding).
EXACT = (("name", 0), ("memory_total_mb", 1), ("power_limit_w", 1), ("ecc_mode", 0), ("mig_mode", 0),
         ("ecc_volatile_sbe", 0), ("ecc_volatile_dbe", 0))


@dataclass
class Comparison:
    """One field of one GPU (``gpu`` is its UUID; "" for the node's own fields)."""

    field: str
    gpu: str
    agent: object
    nvidia_smi: object
    ok: bool
    note: str = ""


# -- nvidia-smi -q -x ---------------------------------------------------------------------------------------
def _text(element, path: str) -> str | None:
    """The text at ``path``, None when absent or "N/A" (what nvidia-smi writes for a reading it has not)."""
    found = element.find(path) if element is not None else None
    text = (found.text or "").strip() if found is not None else ""
    return None if text in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else text


def _number(element, *paths: str) -> float | None:
    """The first of ``paths`` that holds a number ("81559 MiB", "35 %", "70.12 W", "33 C"), without its unit."""
    for path in paths:
        text = _text(element, path)
        if text is not None:
            try:
                return float(text.split()[0])
            except ValueError:
                continue
    return None


def _switch(element, path: str) -> int | None:
    """``Enabled`` / ``Disabled`` as NVML's 1 / 0."""
    text = _text(element, path)
    return None if text is None else int(text.lower() == "enabled")


def _ecc_counts(gpu) -> tuple[int | None, int | None]:
    """Volatile corrected and uncorrected ECC errors: ``single_bit/total`` and ``double_bit/total`` in the older
    layout, the sum of the SRAM and DRAM counters in the newer one (drivers from about R535 on)."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None, None
    if volatile.find("single_bit") is not None:
        sbe, dbe = _number(volatile, "single_bit/total"), _number(volatile, "double_bit/total")
        return (int(sbe) if sbe is not None else None), (int(dbe) if dbe is not None else None)
    corrected = [_number(volatile, c.tag) for c in volatile if c.tag.endswith("_correctable")]
    uncorrected = [_number(volatile, c.tag) for c in volatile if "_uncorrectable" in c.tag]
    corrected, uncorrected = [v for v in corrected if v is not None], [v for v in uncorrected if v is not None]
    return (int(sum(corrected)) if corrected else None), (int(sum(uncorrected)) if uncorrected else None)


def parse_smi_xml(text: str) -> dict:
    """``nvidia-smi -q -x`` as the agent's snapshot names things (the fields the check compares)."""
    root = ET.fromstring(text)  # noqa: S314 - the local nvidia-smi's own output, or a file the operator chose
    gpus = []
    for gpu in root.findall("gpu"):
        sbe, dbe = _ecc_counts(gpu)
        power = ("gpu_power_readings", "power_readings")
        gpus.append({
            "uuid": _text(gpu, "uuid"), "name": _text(gpu, "product_name"),
            "memory_total_mb": _number(gpu, "fb_memory_usage/total"),
            "memory_used_mb": _number(gpu, "fb_memory_usage/used"),
            "memory_reserved_mb": _number(gpu, "fb_memory_usage/reserved"),
            "utilization_gpu": _number(gpu, "utilization/gpu_util"),
            "temperature_c": _number(gpu, "temperature/gpu_temp"),
            "power_w": _number(gpu, *(f"{p}/{f}" for p in power
                                       for f in ("power_draw", "instant_power_draw", "average_power_draw"))),
            "power_limit_w": _number(gpu, *(f"{p}/{f}" for p in power
                                             for f in ("current_power_limit", "enforced_power_limit", "power_limit"))),
            "ecc_mode": _switch(gpu, "ecc_mode/current_ecc"), "mig_mode": _switch(gpu, "mig_mode/current_mig"),
            "ecc_volatile_sbe": sbe, "ecc_volatile_dbe": dbe,
        })
    attached = _number(root, "attached_gpus")
    return {"driver_version": _text(root, "driver_version"), "cuda_version": _text(root, "cuda_version"),
            "gpu_count": int(attached) if attached is not None else len(gpus), "gpus": gpus}


# -- the comparison --------------------------------------------------------------------------------------
def _same(agent, smi, tolerance: float) -> bool:
    if agent is None or smi is None:
        return agent is None and smi is None
    if isinstance(agent, (int, float)) and isinstance(smi, (int, float)):
        return abs(agent - smi) <= tolerance
    return str(agent).strip() == str(smi).strip()


def compare(before: dict, after: dict, smi: dict) -> list[Comparison]:
    """Field by field, the agent's two snapshots (taken before and after ``nvidia-smi``) against its answer."""
    found = [Comparison("driver_version", "", before.get("driver_version"), smi["driver_version"],
                        _same(before.get("driver_version"), smi["driver_version"], 0)),
             Comparison("cuda_version", "", before.get("cuda_version"), smi["cuda_version"],
                        _same(before.get("cuda_version"), smi["cuda_version"], 0))]
    ours = {g.get("uuid"): g for g in before["gpus"] if g.get("state") == "ok"}
    later = {g.get("uuid"): g for g in after["gpus"] if g.get("state") == "ok"}
    theirs = {g["uuid"]: g for g in smi["gpus"]}
    found.append(Comparison("gpu_count", "", len(before["gpus"]), smi["gpu_count"],
                            len(before["gpus"]) == smi["gpu_count"] == len(smi["gpus"])))
    for uuid in sorted(set(ours) | set(theirs), key=str):
        if uuid not in ours or uuid not in theirs:
            found.append(Comparison("uuid", str(uuid), uuid if uuid in ours else None,
                                    uuid if uuid in theirs else None, False,
                                    "only the agent sees it" if uuid in ours else "only nvidia-smi sees it"))
            continue
        gpu, gpu_after, other = ours[uuid], later.get(uuid, ours[uuid]), theirs[uuid]
        found.append(Comparison("uuid", uuid, uuid, uuid, True))
        for field, tolerance in EXACT:
            found.append(Comparison(field, uuid, gpu.get(field), other[field],
                                    _same(gpu.get(field), other[field], tolerance)))
        for field, absolute, share in LIVE:
            values = [v for v in (gpu.get(field), gpu_after.get(field)) if v is not None]
            slack = absolute + share * max(values, default=0)
            if field == "memory_used_mb":
                slack += other.get("memory_reserved_mb") or 0
            value = other[field]
            if not values or value is None:
                ok, note = not values and value is None, ""
            else:
                ok = min(values) - slack <= value <= max(values) + slack
                note = f"agent {min(values):g}..{max(values):g}, tolerance {slack:g}"
            found.append(Comparison(field, uuid, gpu.get(field), value, ok, note))
    return found


def time_snapshots(agent: Agent, samples: int) -> dict:
    """Milliseconds per snapshot of the agent (all its NVML calls and the host counters), over ``samples``."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        agent.snapshot()
        times.append((time.perf_counter() - started) * 1000)
    return {"samples": samples, "median_ms": round(statistics.median(times), 2), "min_ms": round(min(times), 2),
            "max_ms": round(max(times), 2)}


def check(agent: Agent, read_smi, samples: int = 20) -> dict:
    """Snapshot, ``read_smi()`` (the XML text), snapshot, compare; then time ``samples`` snapshots."""
    before = agent.snapshot()
    started = time.perf_counter()
    xml = read_smi()
    smi_ms = (time.perf_counter() - started) * 1000
    after = agent.snapshot()
    smi = parse_smi_xml(xml)
    comparisons = compare(before, after, smi)
    mismatches = [c for c in comparisons if not c.ok]
    return {
        "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "agent_error": before.get("error"),
        "driver_version": before.get("driver_version"), "cuda_version": before.get("cuda_version"),
        "gpu_count": len(before["gpus"]), "models": sorted({g.get("name") or "?" for g in before["gpus"]}),
        "comparisons": [asdict(c) for c in comparisons], "mismatches": len(mismatches),
        "snapshot_timing": time_snapshots(agent, samples), "nvidia_smi_ms": round(smi_ms, 1),
        "verdict": "match" if not mismatches and not before.get("error") else "mismatch",
    }


#: The committed page: written from a real GPU's run only, never from the simulated one.
PAGE = Path(__file__).resolve().parent.parent / "docs" / "device-check.md"


# -- the page ----------------------------------------------------------------------------------------------
HOW_TO_RUN = """## How to run it

On a machine with an NVIDIA GPU, its driver (`nvidia-smi` on the PATH) and a Python with the node agent's
requirements (`nvidia-ml-py`, pinned in `requirements.txt`), from the repository's root:

```sh
scripts/device-check.sh            # 20 timed snapshots; --samples N for another number
```

It prints the result as JSON, rewrites this page with it, and exits 0 when every field matches, 1 when one does
not, 2 when it could not run. Commit the page. `scripts/device-check.sh --simulate 2 --smi-xml FILE` runs the
same comparison against the simulated NVML and a recorded `nvidia-smi -q -x` (the tests do so) and leaves this page
alone, as does a run whose agent reads no GPU.
"""


def _cell(value) -> str:
    return "—" if value is None else str(value).replace("|", "\\|")


def render_markdown(result: dict) -> str:
    """The page ``docs/device-check.md``: the verdict, the comparison table, the timing, how to run it again."""
    timing = result["snapshot_timing"]
    lines = [
        "# Device check: the node agent against nvidia-smi on a real GPU",
        "",
        "Written by `scripts/device-check.sh` (`nodeagent/devicecheck.py`): the agent's NVML backend and "
        "`nvidia-smi -q -x`, field by field, on the same machine. Live readings pass within the two snapshots' "
        "range widened by the tolerance shown.",
        "",
        f"**Run:** {result['ran_at']} · **verdict:** {result['verdict']} ({result['mismatches']} mismatches) · "
        f"**GPUs:** {result['gpu_count']} × {', '.join(result['models'])} · **driver** "
        f"{_cell(result['driver_version'])} · **CUDA** {_cell(result['cuda_version'])}",
        "",
        f"**Snapshot time:** median {timing['median_ms']} ms over {timing['samples']} snapshots "
        f"(min {timing['min_ms']}, max {timing['max_ms']}); `nvidia-smi -q -x` took {result['nvidia_smi_ms']} ms.",
        "",
    ]
    if result.get("agent_error"):
        lines += [f"**The agent could not start NVML:** {result['agent_error']}", ""]
    lines += ["| field | GPU | agent | nvidia-smi | result | note |", "|---|---|---|---|---|---|"]
    for c in result["comparisons"]:
        lines.append(f"| {c['field']} | {_cell(c['gpu'][-12:] or 'node')} | {_cell(c['agent'])} | "
                     f"{_cell(c['nvidia_smi'])} | {'ok' if c['ok'] else '**MISMATCH**'} | {_cell(c['note'] or None)} |")
    return "\n".join(lines) + "\n\n" + HOW_TO_RUN


# -- the command ---------------------------------------------------------------------------------------------
def _run_nvidia_smi() -> str:
    return subprocess.run(["nvidia-smi", "-q", "-x"], check=True, capture_output=True, text=True,  # noqa: S607
                          timeout=120).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="device-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20, help="Snapshots to time (the median is reported).")
    parser.add_argument("--markdown", default="", help="Write the page here (the script: docs/device-check.md).")
    parser.add_argument("--simulate", type=int, default=0, metavar="N", help="The simulated NVML with N GPUs.")
    parser.add_argument("--model", default="H100", help="The simulated GPUs' model.")
    parser.add_argument("--seed", type=int, default=0, help="The simulation's seed.")
    parser.add_argument("--smi-xml", default="", help="A recorded `nvidia-smi -q -x` instead of running it.")
    args = parser.parse_args(argv)
    if args.smi_xml:
        def read_smi():
            with open(args.smi_xml, encoding="utf-8") as file:
                return file.read()
    elif shutil.which("nvidia-smi"):
        read_smi = _run_nvidia_smi
    else:
        print("device-check: nvidia-smi is not on the PATH (or give --smi-xml FILE)", file=sys.stderr)
        return 2
    try:
        backend = make_backend("nvidia", simulate=args.simulate, model=args.model, seed=args.seed)
    except ImportError as exc:
        print(f"device-check: the agent's NVML binding is missing ({exc}); install nvidia-ml-py", file=sys.stderr)
        return 2
    host = SimulatedHostSampler(seed=args.seed) if args.simulate else None
    agent = Agent(backend, host=host).start()
    try:
        result = check(agent, read_smi, samples=args.samples)
    except (subprocess.SubprocessError, OSError, ET.ParseError) as exc:
        print(f"device-check: cannot read nvidia-smi's answer: {exc}", file=sys.stderr)
        return 2
    finally:
        agent.stop()
    print(json.dumps(result, indent=1))
    if result["agent_error"] or not result["gpu_count"]:
        print("device-check: the agent read no GPU through NVML; the page is left as it was", file=sys.stderr)
        return 2
    if args.markdown and not (args.simulate and Path(args.markdown).resolve() == PAGE):
        with open(args.markdown, "w", encoding="utf-8") as file:
            file.write(render_markdown(result))
    return 0 if result["verdict"] == "match" else 1


if __name__ == "__main__":
    sys.exit(main())
