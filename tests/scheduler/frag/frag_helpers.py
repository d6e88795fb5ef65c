"""A small Alibaba-format node and pod CSV pair, for the FGD math, plugin and benchmark tests."""

from __future__ import annotations

from pathlib import Path


def write_fixture(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    # 100 GPUs: small enough to run in seconds, fine enough that every arrived-% bin gets data.
    for i in range(22):
        gpus, model = ((8, "G2") if i < 6 else (2, "T4")) if i < 20 else (4, "V100M16")
        rows.append(f"node-{i},64000,262144,{gpus},{model}")
    nodes.write_text("\n".join(rows) + "\n")
    pods = tmp_path / "pods.csv"
    rows = [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    ]
    shapes = [
        (8000, 16384, 1, 1000, ""),
        (4000, 8192, 1, 470, ""),
        (6000, 12288, 1, 810, ""),
        (2000, 4096, 0, 0, ""),
        (16000, 65536, 2, 1000, ""),
        (4000, 8192, 1, 320, "V100M16|T4"),
        (3000, 8192, 1, 230, ""),
    ]
    for i in range(150):
        cpu, mem, num, milli, spec = shapes[i % len(shapes)]
        rows.append(f"pod-{i:03d},{cpu},{mem},{num},{milli},{spec},LS,Running,0,1,0")
    pods.write_text("\n".join(rows) + "\n")
    return nodes, pods
