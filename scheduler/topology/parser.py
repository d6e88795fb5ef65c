"""Parser of ``nvidia-smi topo -m`` (and ``-mp``) text into a ``Topology``.

Copes with what real copies look like: tabs or runs of spaces between cells, padded `` X `` self
cells, NIC columns and rows (``mlx5_*`` on old drivers, ``NIC#`` + "NIC Legend" on new ones), missing or
truncated NIC rows, ``CPU Affinity`` / ``NUMA Affinity`` / ``GPU NUMA ID`` columns with empty cells,
old (``SOC``, "PCIe switch") and new legends, truncated legends, and a shell prompt line before the
header. Anything else raises ``TopologyParseError`` whose message names the offending line.
"""

from __future__ import annotations

import re
from pathlib import Path

from scheduler.topology.graph import Topology
from scheduler.topology.links import canonical_class

_AFFINITY = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_GPU = re.compile(r"GPU(\d+)$")
_AFFINITY_VALUE = re.compile(r"^(N/A|[0-9][0-9,\-]*)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


class TopologyParseError(ValueError):
    """Input that is not an ``nvidia-smi topo -m`` matrix; the message names the line."""


def _show(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _is_preamble(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(("$", "#", ">")) or "nvidia-smi" in stripped


def parse_topology(text: str, *, gpu_model: str = "", source: str = "") -> Topology:
    """Parse matrix text; ``gpu_model`` (e.g. "A100-SXM4-80GB") picks the bandwidth generation.

    Raises ``TopologyParseError("line N: ...")`` for input that is not a GPU link matrix.
    """
    lines = text.lstrip("\ufeff").splitlines()  # a byte-order mark from Windows editors
    start = 0
    while start < len(lines) and _is_preamble(lines[start]):
        start += 1
    if start == len(lines):
        raise TopologyParseError("line 1: empty input, expected an 'nvidia-smi topo -m' matrix")
    header = lines[start]
    tokens = header.split()
    if tokens[0] != "GPU0" or (len(tokens) > 1 and tokens[1] == "X"):
        raise TopologyParseError(
            f"line {start + 1}: expected the header row of 'nvidia-smi topo -m' (GPU0 GPU1 ...), "
            f"found '{_show(header)}'"
        )
    cut = _AFFINITY.search(header)
    devices = (header[: cut.start()] if cut else header).split()
    affinity_columns = _AFFINITY.findall(header[cut.start() :]) if cut else []
    n_gpus = 0
    while n_gpus < len(devices) and devices[n_gpus] == f"GPU{n_gpus}":
        n_gpus += 1
    for name in devices[n_gpus:]:
        if _GPU.match(name) or canonical_class(name) is not None:
            raise TopologyParseError(f"line {start + 1}: unexpected header column '{name}'")
    nics = devices[n_gpus:]
    if len(set(devices)) != len(devices):
        raise TopologyParseError(f"line {start + 1}: repeated column name in the header")

    rows: dict[str, tuple[int, list[str]]] = {}
    affinity: dict[str, list[str]] = {name: [""] * n_gpus for name in affinity_columns}
    nic_names: dict[str, str] = {}
    index = start + 1
    while index < len(lines):
        line = lines[index]
        lineno = index + 1
        index += 1
        if not line.strip():
            break
        if line.strip().startswith("Legend"):
            index -= 1
            break
        cells = line.split()
        label = cells[0]
        if label not in devices:
            raise TopologyParseError(
                f"line {lineno}: row '{label}' is not a column of the header ({_show(line)})"
            )
        if label in rows:
            raise TopologyParseError(f"line {lineno}: row '{label}' appears twice")
        is_gpu = devices.index(label) < n_gpus
        if is_gpu:
            if len(cells) - 1 < n_gpus:
                raise TopologyParseError(
                    f"line {lineno}: row {label} has {len(cells) - 1} cells, the header has {n_gpus} GPUs"
                )
            # NIC cells follow while they read as link codes (copies sometimes lose them); what is left
            # is the affinity columns.
            count = n_gpus
            while count < len(devices) and count + 1 < len(cells) and canonical_class(cells[count + 1]):
                count += 1
            if (
                count < len(devices)
                and count + 1 < len(cells)
                and not _AFFINITY_VALUE.match(cells[count + 1])
            ):
                raise TopologyParseError(
                    f"line {lineno}: unknown link code '{cells[count + 1]}' in column {devices[count]}"
                )
        else:
            count = min(len(devices), len(cells) - 1)
        links = cells[1 : 1 + count]
        for column, cell in zip(devices, links, strict=False):
            if canonical_class(cell) is None:
                raise TopologyParseError(f"line {lineno}: unknown link code '{cell}' in column {column}")
            if (column == label) != (canonical_class(cell) == "X"):
                raise TopologyParseError(f"line {lineno}: cell {label}/{column} is '{cell}'")
        if is_gpu:
            gpu = devices.index(label)
            for name, value in zip(affinity_columns, cells[1 + count :], strict=False):
                affinity[name][gpu] = value
        rows[label] = (lineno, links)
    # The legends follow; only the NIC legend carries information (NIC# -> device name).
    for line in lines[index:]:
        match = _NIC_LEGEND.match(line)
        if match:
            nic_names[match.group(1)] = match.group(2)

    missing = [f"GPU{i}" for i in range(n_gpus) if f"GPU{i}" not in rows]
    if n_gpus == 0:
        raise TopologyParseError(f"line {start + 1}: the header lists no GPU columns")
    if missing:
        raise TopologyParseError(f"line {index}: matrix ends without row {missing[0]}")

    classes: list[list[str]] = [[""] * n_gpus for _ in range(n_gpus)]
    counts: list[list[int]] = [[0] * n_gpus for _ in range(n_gpus)]
    for i in range(n_gpus):
        lineno, links = rows[f"GPU{i}"]
        for j in range(n_gpus):
            cell = links[j].strip().upper()
            c = canonical_class(cell) or ""
            classes[i][j] = c
            counts[i][j] = int(cell[2:]) if c == "NV" else 0
            if j < i and (classes[j][i], counts[j][i]) != (c, counts[i][j]):
                raise TopologyParseError(
                    f"line {lineno}: GPU{i}->GPU{j} is {links[j]} but GPU{j}->GPU{i} is "
                    f"{rows[f'GPU{j}'][1][i]} (matrix not symmetric)"
                )
    gpu_nic = tuple(
        tuple(canonical_class(c) or "" for c in rows[f"GPU{i}"][1][n_gpus:])
        + ("",) * (len(nics) - len(rows[f"GPU{i}"][1]) + n_gpus)
        for i in range(n_gpus)
    )
    return Topology(
        classes=tuple(tuple(r) for r in classes),
        nvlinks=tuple(tuple(r) for r in counts),
        nics=tuple(nic_names.get(name, name) for name in nics),
        gpu_nic=gpu_nic,
        cpu_affinity=tuple(affinity.get("CPU Affinity", ())),
        numa=tuple(affinity.get("NUMA Affinity", ())),
        gpu_model=gpu_model,
        source=source,
    )


def read_topology_file(path: str, *, gpu_model: str = "") -> Topology:
    """Parse a matrix file; errors name the file and the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise TopologyParseError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return parse_topology(text, gpu_model=gpu_model, source=p.name)
    except TopologyParseError as exc:
        raise TopologyParseError(f"{p.name}: {exc}") from None
