"""Link classes of a GPU pair and their effective bandwidth per class and hardware generation.

Classes, closest first (the ladder of ``nvidia-smi topo -m`` and NCCL): ``NV`` (a bonded set of k
NVLinks, direct or through NVSwitch), ``PIX`` (one PCIe switch), ``PXB`` (several PCIe switches),
``PHB`` (through a PCIe host bridge), ``NODE`` (between host bridges of one NUMA node), ``SYS`` (across
the SMP interconnect; ``SOC`` on pre-2017 drivers), and ``NET`` (GPUs on different nodes).

Effective bandwidth ``B`` in GB/s per direction (what a ring all-reduce can push over the link):

=========================  =========================================  ==========================
class                      B                                          anchor
=========================  =========================================  ==========================
``NV`` k links, direct     k x L_gen x 0.80                           A100 NV12 pair 208 GB/s
                                                                      (0.69), DGX-1V ring 130
                                                                      (0.87)
``NV`` through NVSwitch    links_per_gpu x L_gen x 0.82 (any subset)  H200 367, DGX-2 122
``PIX``                    P_gen x 0.90                               Gen3 11.3 GB/s
``PXB``                    P_gen x 0.85                               NCCL still does direct P2P
``PHB``                    P_gen x 0.70                               Gen3 8.2 GB/s
``NODE``                   P_gen x 0.60                               host-staged by NCCL
``SYS``                    min(P_gen, X_cpu) x 0.50                   NCCL topo model
``NET``                    NIC_GBps x 0.90 per node                   12 GB/s per 100 Gbit/s
=========================  =========================================  ==========================

``L_gen`` (GB/s per NVLink per direction): 20 NVLink1 (P100), 25 NVLink2/3/4 (V100, A100, H100),
50 NVLink5 (B200), 14.06 for the RTX 3090 / A6000 NVLink3 bridge, 25.78 for the RTX 2080 Ti bridge.
``P_gen`` (PCIe x16, NCCL's model): 12 Gen3, 24 Gen4, 48 Gen5. ``X_cpu`` (SMP link): 6 Broadwell,
10 Skylake, 16 AMD, 22 Sapphire Rapids, 32 POWER9. Sources: ../shared/references/topology-allocation.md
section 5.1 and ../shared/data/topologies/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# PCIe-path classes from closest to farthest; index = rank used for locality tie-breaks.
PCIE_CLASSES: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
# Accepted spellings in matrices -> canonical class.
CLASS_ALIASES: dict[str, str] = {"SOC": "SYS", "CPU": "NODE"}

# Efficiency factors per class (see the module docstring for the anchors).
ETA_NVLINK = 0.80
ETA_NVSWITCH = 0.82
ETA_NET = 0.90
ETA_PCIE: dict[str, float] = {"PIX": 0.90, "PXB": 0.85, "PHB": 0.70, "NODE": 0.60, "SYS": 0.50}

# Largest number of NVLinks one GPU of any generation has (H100/B200: 18). A node where every pair
# shows NV#k with k x (n - 1) above this cannot be a direct mesh: the links go through NVSwitch.
MAX_NVLINKS_PER_GPU = 18

# Startup latency per ring step (seconds): intra-node vs. across the network.
ALPHA_INTRA_S = 5e-6
ALPHA_NET_S = 25e-6

# Default network: one 100 Gbit/s NIC = 12 GB/s in NCCL's model.
NIC_100G_GBPS = 12.0


@dataclass(frozen=True)
class Generation:
    """Per-link NVLink bandwidth, PCIe x16 bandwidth and SMP-link bandwidth of one GPU/CPU family."""

    name: str
    nvlink_gbps: float
    pcie_gbps: float
    smp_gbps: float


GENERATIONS: dict[str, Generation] = {
    "pascal": Generation("pascal", 20.0, 12.0, 6.0),
    "volta": Generation("volta", 25.0, 12.0, 10.0),
    "turing": Generation("turing", 25.78, 12.0, 10.0),
    "ampere": Generation("ampere", 25.0, 24.0, 16.0),
    "ampere-bridge": Generation("ampere-bridge", 14.06, 24.0, 16.0),
    "ada": Generation("ada", 14.06, 24.0, 22.0),
    "hopper": Generation("hopper", 25.0, 48.0, 22.0),
    "blackwell": Generation("blackwell", 50.0, 48.0, 40.0),
    # Unknown hardware: NVLink2-4 per-link speed, PCIe Gen4, AMD-class SMP link.
    "generic": Generation("generic", 25.0, 24.0, 16.0),
}

# Substrings of GPU model names (upper case) -> generation; first match wins.
_MODEL_HINTS: tuple[tuple[str, str], ...] = (
    ("P100", "pascal"),
    ("V100", "volta"),
    ("T4", "turing"),
    ("2080", "turing"),
    ("A100", "ampere"),
    ("A800", "ampere"),
    ("A6000", "ampere-bridge"),
    ("3090", "ampere-bridge"),
    ("A40", "ampere-bridge"),
    ("L40", "ada"),
    ("4090", "ada"),
    ("H100", "hopper"),
    ("H200", "hopper"),
    ("H800", "hopper"),
    ("GH200", "hopper"),
    ("B200", "blackwell"),
    ("GB200", "blackwell"),
)


def generation_for(gpu_model: str = "", nv_counts: tuple[int, ...] = ()) -> Generation:
    """The generation of a GPU model name; without a known name, a guess from the NVLink counts.

    NV18 pairs only exist on Hopper/Blackwell NVSwitch boards (Hopper assumed), NV12 on A100 boards;
    anything else is ``generic``.
    """
    upper = gpu_model.upper()
    for hint, gen in _MODEL_HINTS:
        if hint in upper:
            return GENERATIONS[gen]
    if 18 in nv_counts:
        return GENERATIONS["hopper"]
    if 12 in nv_counts:
        return GENERATIONS["ampere"]
    return GENERATIONS["generic"]


def canonical_class(code: str) -> str | None:
    """Canonical class of a matrix cell (``NV``, a PCIe class or ``X``), or None if unknown."""
    code = code.strip().upper()
    code = CLASS_ALIASES.get(code, code)
    if code == "X" or code in PCIE_CLASSES:
        return code
    if code.startswith("NV") and code[2:].isdigit() and int(code[2:]) > 0:
        return "NV"
    return None


def pcie_bandwidth(link_class: str, gen: Generation) -> float:
    """Effective GB/s of a PCIe-path class: ``P_gen x eta``, SMP-limited for ``SYS``."""
    if link_class == "SYS":
        return min(gen.pcie_gbps, gen.smp_gbps) * ETA_PCIE["SYS"]
    return gen.pcie_gbps * ETA_PCIE[link_class]


def nvlink_bandwidth(count: int, gen: Generation) -> float:
    """Effective GB/s of ``count`` direct NVLinks: ``count x L_gen x 0.80``."""
    return count * gen.nvlink_gbps * ETA_NVLINK


def nvswitch_bandwidth(links_per_gpu: int, gen: Generation) -> float:
    """Effective ring GB/s of any GPU subset on an NVSwitch board: ``links x L_gen x 0.82``."""
    return links_per_gpu * gen.nvlink_gbps * ETA_NVSWITCH


def network_bandwidth(nic_count: int, nic_gbit: float = 100.0) -> float:
    """Effective GB/s out of one node: ``nics x 12 GB/s per 100 Gbit x 0.9`` (at least one NIC)."""
    return max(1, nic_count) * NIC_100G_GBPS * (nic_gbit / 100.0) * ETA_NET
