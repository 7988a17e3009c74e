"""A simulated ``npu-smi``: the text Huawei's tool prints for ``npu-smi info`` and its ``-t`` detail queries,
rendered from :class:`~nodeagent.backends.simulation.SimulatedDevices`.

``AscendBackend(runner=FakeNpuSmi(8))`` runs the backend's real parsing code without an NPU. A device that
``offbus`` failed is still listed, with health ``Critical`` and an alarm code, but its detail queries fail the
way npu-smi does when the driver cannot reach a chip; a ``lost`` one is no longer listed.
"""

from __future__ import annotations

from .simulation import SimulatedDevices
from .tools import ToolError

MODELS = {  # chip name npu-smi prints, HBM MiB, max power W
    "Ascend910B": ("910B3", 65536, 400),
    "Ascend910": ("910B", 32768, 310),
    "Ascend310P": ("310P3", 24576, 150),
}
#: Alarm codes the simulation raises (npu-smi prints 8 hex digits); ``offbus`` is critical, ``alarm`` a warning.
CRITICAL_CODE, CRITICAL_TEXT = "80E18402", "node type=SoC, sensor type=Heartbeat, event state=device lost"
WARNING_CODE, WARNING_TEXT = "80CB8009", "node type=HBM, sensor type=Memory, event state=correctable ECC rising"
RULE = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
DOUBLE = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"


class FakeNpuSmi(SimulatedDevices):
    """Callable as a backend runner: ``fake(["info", "-t", "usages", "-i", "0", "-c", "0"]) -> text``."""

    def __init__(self, count: int = 8, model: str | None = None, seed: int = 0, version: str = "23.0.6"):
        self.model = model or "Ascend910B"
        self.chip_name, memory_mb, max_power = MODELS.get(self.model, (self.model.removeprefix("Ascend"), 65536, 400))
        super().__init__(count, seed=seed, memory_mb=memory_mb, max_power=max_power)
        self.version = version

    def __call__(self, args: list[str]) -> str:
        self.wait_while_hung()
        if args == ["info"]:
            return self.info()
        if args[:2] == ["info", "-t"] and len(args) >= 3:
            kind = args[2]
            if kind == "topo":
                return self.topo()
            try:
                npu = int(args[args.index("-i") + 1])
            except (ValueError, IndexError) as exc:
                raise ToolError("npu-smi: Usage: npu-smi info -t <type> -i <id> [-c <chip_id>]") from exc
            return self.detail(kind, npu)
        raise ToolError(f"npu-smi: unknown command {' '.join(args)}")

    def _health(self, i: int) -> str:
        if self.failed[i]:
            return "Critical"
        return "Warning" if self.alarm[i] else "OK"

    def info(self) -> str:
        lines = ["+" + "-" * 96 + "+",
                 f"| npu-smi {self.version:<24} Version: {self.version:<54}|", RULE,
                 "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
                 "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
                 DOUBLE]
        for i in self.visible():
            bus = f"0000:{(0x01 + 0x20 * i) & 0xFF:02X}:00.0"
            if self.failed[i]:
                power, temp, aicore, hbm = "NA", "NA", "NA", "NA / NA"
            else:
                power, temp = f"{self.power_w(i):.1f}", str(self.temperature(i))
                aicore, hbm = str(self.util(i)), f"{self.memory_used_mb(i)} / {self.memory_mb}"
            lines.append(f"| {i:<5} {self.chip_name:<19} | {self._health(i):<13} | {power:<11} {temp:<17} "
                         f"{'0    / 0':<21}|")
            lines.append(f"| {0:<25} | {bus:<13} | {aicore:<11} {'0    / 0':<17} {hbm:<21}|")
            lines.append(DOUBLE)
        lines += [RULE,
                  "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
                  DOUBLE]
        for i in self.visible():
            if self.load[i] and not self.failed[i]:
                lines.append(f"| {i:<7} {0:<17} | {40000 + i:<13} | {'python3.10':<24} | "
                             f"{self.memory_used_mb(i) - 300:<23} |")
            else:
                lines.append(f"| {'No running processes found in NPU ' + str(i):<94} |")
            lines.append(DOUBLE)
        return "\n".join(lines) + "\n"

    def detail(self, kind: str, i: int) -> str:
        if not 0 <= i < self.count or self.lost[i]:
            raise ToolError(f"npu-smi: the device {i} does not exist")
        if kind == "health":
            code, text = ((CRITICAL_CODE, CRITICAL_TEXT) if self.failed[i] else
                          (WARNING_CODE, WARNING_TEXT) if self.alarm[i] else ("NA", "NA"))
            return _kv([("Health Status", self._health(i)), ("Error Code", code), ("Error Information", text)])
        if self.failed[i]:
            raise ToolError(f"npu-smi: dcmi get device info failed (device {i}, error code -8020)")
        if kind == "board":
            return _kv([("NPU ID", i), ("Chip ID", 0), ("Chip Type", "Ascend"), ("Chip Name", self.chip_name),
                        ("Chip Version", "V1"), ("Board ID", "0x64"), ("BOM ID", 1),
                        ("VDie ID", f"{self.seed & 0xFFFFFFFF:08X} {i:08X} 20A02B34 4C1D0A60 C2108001"),
                        ("Serial Number", f"033VNY10MC{self.seed % 100000:05d}{i:03d}"),
                        ("Firmware Version", "7.1.0.5.220")])
        if kind == "usages":
            hbm_rate = round(100 * self.memory_used_mb(i) / self.memory_mb)
            return _kv([("Memory Capacity(MB)", 0), ("Memory Usage Rate(%)", 0), ("Hugepages Total(page)", 0),
                        ("Hugepages Usage Rate(%)", 0), ("HBM Capacity(MB)", self.memory_mb),
                        ("HBM Usage Rate(%)", hbm_rate), ("Aicore Usage Rate(%)", self.util(i)),
                        ("Aivector Usage Rate(%)", self.util(i) // 2), ("Aicpu Usage Rate(%)", 0),
                        ("Ctrlcpu Usage Rate(%)", 2), ("DDR Bandwidth Usage Rate(%)", 0),
                        ("HBM Bandwidth Usage Rate(%)", self.util(i) // 2), ("Chip ID", 0)])
        if kind == "ecc":
            return _kv([("NPU ID", i), ("Chip Count", 1), ("DDR Single Bit Error Count", 0),
                        ("DDR Double Bit Error Count", 0), ("HBM Single Bit Error Count", self.corrected[i]),
                        ("HBM Double Bit Error Count", self.uncorrected[i]),
                        ("HBM Single Bit Aggregate Total Err Cnt", self.corrected[i]),
                        ("HBM Double Bit Aggregate Total Err Cnt", self.uncorrected[i]),
                        ("HBM Single Bit Isolated Pages Count", 0),
                        ("HBM Double Bit Isolated Pages Count", self.retired[i])])
        raise ToolError(f"npu-smi: unknown type {kind}")

    def topo(self) -> str:
        """Eight 910B NPUs are fully meshed by HCCS; across boards of four, older 910s go through the host."""
        names = [f"NPU{i}" for i in range(self.count)]
        lines = [" " * 11 + "".join(f"{n:<11}" for n in names) + "CPU Affinity"]
        for a in range(self.count):
            cells = ["X" if a == b else ("HCCS" if self.chip_name.startswith("910B") or a // 4 == b // 4 else "SYS")
                     for b in range(self.count)]
            lines.append(f"{names[a]:<11}" + "".join(f"{c:<11}" for c in cells) + f"{a * 24}-{a * 24 + 23}")
        lines += ["", "Legend:", "", "  X    = Self", "  SYS  = Path traversing PCIe and NUMA nodes.",
                  "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.",
                  "  PIX  = Path traversing a single PCIe switch", "  PXB  = Path traversing multiple PCIe switches",
                  "  HCCS = Connection traversing HCCS.", "  NA   = Unknown relationship."]
        return "\n".join(lines) + "\n"


def _kv(pairs) -> str:
    return "".join(f"        {key:<39}: {value}\n" for key, value in pairs)
