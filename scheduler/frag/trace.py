"""Load the Alibaba GPU-sharing trace (``openb_node_list_*.csv``, ``openb_pod_list_*.csv``).

Nodes: ``sn, cpu_milli, memory_mib, gpu, model``. Pods: ``name, cpu_milli, memory_mib, num_gpu,
gpu_milli`` and optionally ``gpu_spec`` (``|``-separated models); other columns are ignored. A pod
with ``num_gpu == 1`` and ``gpu_milli < 1000`` shares one GPU; ``gpu_milli == 1000`` (or several
GPUs) means whole GPUs; ``num_gpu == 0`` or ``gpu_milli == 0`` asks for no GPU. Bad input raises
``TraceError`` with one line naming the file, the line and what is wrong.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from scheduler.model import GPU_MILLI, Gpu, Node, TaskRequest

# GPU memory the FGD simulator assumes per model (MiB); unknown models get 0 (no memory accounting).
GPU_MEMORY_MIB: dict[str, int] = {
    "T4": 15_109,
    "V100M16": 16_160,
    "P100": 16_280,
    "G2": 20_000,
    "A10": 22_731,
    "G3": 30_000,
    "V100M32": 32_510,
}

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    """Malformed or missing trace file; the message is one line for the user."""


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(
                    f"{path}: missing column(s) {', '.join(missing)} (header: {','.join(header) or 'empty'})"
                )
            for line, row in enumerate(reader, start=2):
                if None in row or any(v is None for v in row.values()):
                    raise TraceError(f"{path}:{line}: expected {len(header)} fields")
                yield line, row
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a UTF-8 text CSV file") from None
    except csv.Error as exc:
        raise TraceError(f"{path}: malformed CSV ({exc})") from None


def _int(path: Path, line: int, row: dict[str, str], column: str, lo: int = 0, hi: int | None = None) -> int:
    raw = row[column].strip()
    try:
        value = int(float(raw)) if raw else 0
    except ValueError:
        raise TraceError(f"{path}:{line}: column {column!r} is not a number: {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise TraceError(f"{path}:{line}: column {column!r} must be {bound}, got {value}")
    return value


def load_nodes(path: Path) -> list[Node]:
    nodes: list[Node] = []
    for line, row in _rows(path, NODE_COLUMNS):
        name = row["sn"].strip()
        if not name:
            raise TraceError(f"{path}:{line}: empty node name")
        count = _int(path, line, row, "gpu", 0, 64)
        model = row["model"].strip()
        memory = GPU_MEMORY_MIB.get(model, 0)
        nodes.append(
            Node(
                name=name,
                cpu_milli=_int(path, line, row, "cpu_milli"),
                memory_mib=_int(path, line, row, "memory_mib"),
                gpus=[Gpu(index=i, model=model, memory_mib=memory) for i in range(count)],
            )
        )
    if not nodes:
        raise TraceError(f"{path}: no nodes")
    return nodes


def load_pods(path: Path) -> list[TaskRequest]:
    pods: list[TaskRequest] = []
    for line, row in _rows(path, POD_COLUMNS):
        name = row["name"].strip()
        if not name:
            raise TraceError(f"{path}:{line}: empty pod name")
        num = _int(path, line, row, "num_gpu", 0, 64)
        milli = _int(path, line, row, "gpu_milli", 0, GPU_MILLI)
        spec = (row.get("gpu_spec") or "").strip()
        models = tuple(m for m in spec.split("|") if m) if spec else ()
        gpus, share = 0, 0
        if num and milli:
            if num == 1 and milli < GPU_MILLI:
                share = milli
            else:
                gpus = num
        pods.append(
            TaskRequest(
                task_id=name,
                cpu_milli=_int(path, line, row, "cpu_milli"),
                memory_mib=_int(path, line, row, "memory_mib"),
                gpus=gpus,
                gpu_milli=share,
                gpu_models=models,
            )
        )
    if not pods:
        raise TraceError(f"{path}: no pods")
    return pods
