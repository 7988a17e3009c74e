"""A simulated ``hy-smi``: the ROCm-SMI-style lines of Hygon's tool, rendered from
:class:`~nodeagent.backends.simulation.SimulatedDevices`.

An ``offbus`` DCU is still listed, its readings ``N/A``; a ``lost`` one is gone from the output.
"""

from __future__ import annotations

from .simulation import SimulatedDevices
from .tools import ToolError

MODELS = {"K100": ("K100_AI", 65520, 350), "Z100": ("Z100L", 32752, 300)}  # series, VRAM MiB, max power W
HEAD = "=" * 28 + " System Management Interface " + "=" * 28
TAIL = "=" * 35 + " End of SMI Log " + "=" * 35


class FakeHySmi(SimulatedDevices):
    """Callable as a backend runner: ``fake(["--showproductname", ...]) -> text``."""

    def __init__(self, count: int = 8, model: str | None = None, seed: int = 0):
        self.model = model or "K100"
        self.series, memory_mb, max_power = MODELS.get(self.model, (self.model, 65520, 350))
        super().__init__(count, seed=seed, memory_mb=memory_mb, max_power=max_power)

    def __call__(self, args: list[str]) -> str:
        self.wait_while_hung()
        if args == ["--showtopotype"]:
            return self.topo()
        if not args or not all(a.startswith("--show") or a in ("vram", "all") for a in args):
            raise ToolError(f"hy-smi: unrecognized arguments: {' '.join(args)}")
        lines = [HEAD]
        for i in self.visible():
            d = f"DCU[{i}]\t\t: "

            def value(reading, i=i):
                return "N/A" if self.failed[i] else reading

            used = self.memory_used_mb(i)
            lines += [f"{d}Card series: {self.series}", f"{d}Card model: 0x6210",
                      f"{d}Card vendor: Chengdu Haiguang IC Design Co., Ltd.",
                      f"{d}Unique ID: 0x{self.seed & 0xFFFFFFFF:08x}{i:08x}",
                      f"{d}vram Total Memory (MiB): {value(self.memory_mb)}",
                      f"{d}vram Total Used Memory (MiB): {value(used)}",
                      f"{d}DCU use (%): {value(self.util(i))}",
                      f"{d}Temperature (Sensor junction) (C): {value(f'{self.temperature(i):.1f}')}",
                      f"{d}Average Graphics Package Power (W): {value(f'{self.power_w(i):.1f}')}",
                      f"{d}          Block     Status  Correctable Error  Uncorrectable Error"]
            if not self.failed[i]:
                lines += [f"{d}            UMC    ENABLED  {self.corrected[i]:>17}  {self.uncorrected[i]:>19}",
                          f"{d}           SDMA    ENABLED  {0:>17}  {0:>19}",
                          f"{d}            GFX    ENABLED  {0:>17}  {0:>19}"]
        lines.append(TAIL)
        return "\n".join(lines) + "\n"

    def topo(self) -> str:
        names = [f"DCU{i}" for i in range(self.count)]
        lines = ["=" * 24 + " Link Type between two DCUs " + "=" * 24, " " * 7 + "".join(f"{n:<13}" for n in names)]
        for a in range(self.count):
            lines.append(f"{names[a]:<7}" + "".join(f"{'0' if a == b else 'XGMI':<13}" for b in range(self.count)))
        lines.append(TAIL)
        return "\n".join(lines) + "\n"
