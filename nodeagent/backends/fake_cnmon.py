"""A simulated ``cnmon``: the text of Cambricon's ``cnmon info`` rendered from
:class:`~nodeagent.backends.simulation.SimulatedDevices`.

An ``offbus`` card is still listed, with ``N/A`` readings (what cnmon prints for a card the driver cannot
reach); a ``lost`` card is gone from the listing.
"""

from __future__ import annotations

from .simulation import SimulatedDevices
from .tools import ToolError

MODELS = {"MLU370-X8": (49152, 250), "MLU590": (81920, 350), "MLU370-S4": (24576, 75)}  # memory MiB, max power W


class FakeCnmon(SimulatedDevices):
    """Callable as a backend runner: ``fake(["info"]) -> text``."""

    def __init__(self, count: int = 8, model: str | None = None, seed: int = 0, driver: str = "v5.10.22"):
        self.model = model or "MLU370-X8"
        memory_mb, max_power = MODELS.get(self.model, (49152, 250))
        super().__init__(count, seed=seed, memory_mb=memory_mb, max_power=max_power)
        self.driver = driver

    def __call__(self, args: list[str]) -> str:
        self.wait_while_hung()
        if args != ["info"]:
            raise ToolError(f"cnmon: unknown command {' '.join(args)}")
        blocks = []
        for i in self.visible():
            na = self.failed[i]

            def value(reading, unit="", na=na):
                return "N/A" if na else f"{reading}{unit}"

            used = self.memory_used_mb(i)
            blocks.append("\n".join([
                f"Card {i}",
                f"    Product Name                   : {self.model}",
                f"    Product Type                   : {self.model.split('-')[0]}",
                f"    Driver                         : {self.driver}",
                "    Firmware                       : v1.1.6",
                f"    Board Serial Number            : SN/{self.seed % 10**6:06d}{i:04d}",
                f"    UUID                           : MLU-{self.seed & 0xFFFFFFFF:08x}-{i:04x}-0370-0000{i:08x}",
                "    PCI Info",
                f"        Bus Number                 : 0x{0x15 + 0x10 * i & 0xFF:02x}",
                "    Utilization",
                f"        MLU Average                : {value(self.util(i), ' %')}",
                "    Physical Memory Usage",
                f"        Total                      : {value(self.memory_mb, ' MiB')}",
                f"        Used                       : {value(used, ' MiB')}",
                f"        Free                       : {value(self.memory_mb - used, ' MiB')}",
                "    Power Info",
                f"        Usage                      : {value(f'{self.power_w(i):.2f}', ' W')}",
                f"        Cap                        : {self.max_power} W",
                "    Temperature Info",
                f"        Board                      : {value(self.temperature(i) - 5, ' C')}",
                f"        Chip                       : {value(self.temperature(i), ' C')}",
                "    ECC Info",
                f"        Corrected Error            : {value(self.corrected[i])}",
                f"        Uncorrected Error          : {value(self.uncorrected[i])}",
            ]))
        return "\n".join(blocks) + "\n"
