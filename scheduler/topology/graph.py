"""The link topology of one node: what ``Node.topology`` holds.

Built from ``nvidia-smi topo -m`` text (``scheduler.topology.parser``) or from NVML
(``scheduler.topology.nvml``), carried in JSON and annotations as ``to_dict()``/``from_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from scheduler.topology.links import (
    MAX_NVLINKS_PER_GPU,
    PCIE_CLASSES,
    Generation,
    canonical_class,
    generation_for,
)

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Topology:
    """GPU-GPU link classes of one node, plus NIC locality and CPU/NUMA affinity.

    ``classes[i][j]`` is ``"X"`` on the diagonal, ``"NV"`` for NVLink (``nvlinks[i][j]`` links) or a
    PCIe class (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``). ``pcie[i][j]``, when known, is the PCIe
    class hidden behind an NVLink pair (``nvidia-smi topo -mp`` or NVML), else ``""``.
    ``nvswitch``: True/False when known, None = infer (every pair NV#k with k x (n-1) > 18).
    """

    classes: tuple[tuple[str, ...], ...]
    nvlinks: tuple[tuple[int, ...], ...]
    nics: tuple[str, ...] = ()
    # gpu_nic[i][k]: class between GPU i and NIC k ("" when unknown).
    gpu_nic: tuple[tuple[str, ...], ...] = ()
    cpu_affinity: tuple[str, ...] = ()
    numa: tuple[str, ...] = ()
    pcie: tuple[tuple[str, ...], ...] = ()
    gpu_model: str = ""
    nvswitch: bool | None = None
    nic_gbit: float = 100.0
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        n = len(self.classes)
        if any(len(row) != n for row in self.classes) or len(self.nvlinks) != n:
            raise ValueError("topology: link matrix must be square")
        for i in range(n):
            for j in range(n):
                a, b = self.classes[i][j], self.classes[j][i]
                if a != b or self.nvlinks[i][j] != self.nvlinks[j][i]:
                    raise ValueError(f"topology: GPU{i}-GPU{j} is not symmetric ({a} vs {b})")
                if (i == j) != (a == "X"):
                    raise ValueError(f"topology: GPU{i}-GPU{j} has class {a}")

    # -- shape --------------------------------------------------------------------------------------

    @property
    def gpu_count(self) -> int:
        return len(self.classes)

    def link(self, i: int, j: int) -> str:
        """The matrix cell of a pair as printed: ``X``, ``NV12``, ``PIX``, ... ."""
        c = self.classes[i][j]
        return f"NV{self.nvlinks[i][j]}" if c == "NV" else c

    @cached_property
    def is_nvswitch(self) -> bool:
        """All GPUs hang off NVSwitch: any subset gets the same NVLink bandwidth."""
        if self.nvswitch is not None:
            return self.nvswitch
        n = self.gpu_count
        if n < 3:
            return False
        counts = {self.nvlinks[i][j] for i in range(n) for j in range(n) if i != j}
        all_nv = all(self.classes[i][j] == "NV" for i in range(n) for j in range(n) if i != j)
        return all_nv and len(counts) == 1 and next(iter(counts)) * (n - 1) > MAX_NVLINKS_PER_GPU

    @cached_property
    def links_per_gpu(self) -> int:
        """NVLinks of one GPU (on an NVSwitch board every pair shows this count)."""
        if self.is_nvswitch:
            return max(self.nvlinks[0])
        return max((sum(row) for row in self.nvlinks), default=0)

    @cached_property
    def generation(self) -> Generation:
        counts = tuple(sorted({c for row in self.nvlinks for c in row if c}))
        return generation_for(self.gpu_model, counts)

    @cached_property
    def is_uniform(self) -> bool:
        """Every GPU pair has the same link (NVSwitch, full mesh of equal links, one PCIe switch)."""
        n = self.gpu_count
        cells = {self.link(i, j) for i in range(n) for j in range(n) if i != j}
        return len(cells) <= 1

    def pcie_class(self, i: int, j: int) -> str:
        """The PCIe path class of a pair; for NVLink pairs the hidden one when known, else a guess
        from NUMA/CPU affinity (same -> ``NODE``, different -> ``SYS``)."""
        c = self.classes[i][j]
        if c in PCIE_CLASSES or c == "X":
            return c
        if self.pcie and self.pcie[i][j]:
            return self.pcie[i][j]
        return "NODE" if self.same_numa(i, j) else "SYS"

    def same_numa(self, i: int, j: int) -> bool:
        """Same NUMA node (or, without NUMA ids, the same CPU affinity); unknown counts as same."""
        for column in (self.numa, self.cpu_affinity):
            if column and column[i] not in ("", "N/A") and column[j] not in ("", "N/A"):
                return column[i] == column[j]
        return True

    @cached_property
    def near_nic_count(self) -> int:
        """NICs behind a PCIe switch shared with some GPU (PIX/PXB); at least 1."""
        near = {k for row in self.gpu_nic for k, c in enumerate(row) if c in ("PIX", "PXB")}
        return max(1, len(near))

    @cached_property
    def fingerprint(self) -> tuple[Any, ...]:
        """Hashable identity of everything the cost model reads (cache key for per-topology tables)."""
        return (
            self.classes,
            self.nvlinks,
            self.pcie,
            self.numa,
            self.cpu_affinity,
            self.generation,
            self.is_nvswitch,
        )

    # -- serialisation ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``links`` as the printed matrix rows (``X``, ``NV12``, ``PIX`` ...)."""
        n = self.gpu_count
        return {
            "version": FORMAT_VERSION,
            "links": [[self.link(i, j) for j in range(n)] for i in range(n)],
            "nics": list(self.nics),
            "gpu_nic": [list(r) for r in self.gpu_nic],
            "cpu_affinity": list(self.cpu_affinity),
            "numa": list(self.numa),
            "pcie": [list(r) for r in self.pcie],
            "gpu_model": self.gpu_model,
            "nvswitch": self.nvswitch,
            "nic_gbit": self.nic_gbit,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        """Inverse of ``to_dict``; raises ValueError with one clear line on malformed input."""
        try:
            links = data["links"]
            classes: list[tuple[str, ...]] = []
            counts: list[tuple[int, ...]] = []
            for i, row in enumerate(links):
                crow: list[str] = []
                nrow: list[int] = []
                for j, cell in enumerate(row):
                    c = canonical_class(str(cell))
                    if c is None:
                        raise ValueError(f"topology: unknown link code {cell!r} at GPU{i}-GPU{j}")
                    crow.append(c)
                    nrow.append(int(str(cell).strip().upper()[2:]) if c == "NV" else 0)
                classes.append(tuple(crow))
                counts.append(tuple(nrow))
            return cls(
                classes=tuple(classes),
                nvlinks=tuple(counts),
                nics=tuple(data.get("nics", ())),
                gpu_nic=tuple(tuple(r) for r in data.get("gpu_nic", ())),
                cpu_affinity=tuple(data.get("cpu_affinity", ())),
                numa=tuple(data.get("numa", ())),
                pcie=tuple(tuple(r) for r in data.get("pcie", ())),
                gpu_model=str(data.get("gpu_model", "")),
                nvswitch=data.get("nvswitch"),
                nic_gbit=float(data.get("nic_gbit", 100.0)),
                source=str(data.get("source", "")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"topology: malformed topology dict ({exc!s})") from None
