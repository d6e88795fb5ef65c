#!/usr/bin/env python
"""Smoke test of gpu-platform/pytorch and gpu-platform/pytorch-cpu. Runs inside the container:

    python /opt/gpu-platform/smoke-test/pytorch.py [--require-gpu]

Checks, one line each: PyTorch imports and is the build this image promises (CUDA wheel or CPU
wheel); the GPUs PyTorch sees, each running a matrix multiply; a tiny training step whose loss falls, its rate reported through gpu_platform;
its model and optimizer through torch.save / torch.load; the base image's preemption loop (checkpoint
on SIGTERM, resume with RESUME=1);
a two-process all-reduce through torch.distributed: NCCL when two GPUs are visible, gloo otherwise (the
CPU twin, a one-GPU host). Exit status 0 when everything passes, 1 when a check fails, 2 on bad usage.
Both variants (GPU and CPU) are built from one Dockerfile and ship this one file, so it must stay
Python 3.10.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

FAILURES: list[str] = []


def report(ok: bool, what: str) -> bool:
    print(f"{'ok   ' if ok else 'FAIL '} {what}")
    if not ok:
        FAILURES.append(what)
    return ok


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_gpus(torch, require_gpu: bool) -> int:
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        if require_gpu:
            report(False, "no GPU visible to PyTorch: run with GPUs and check NVIDIA_VISIBLE_DEVICES")
        else:
            print("skip  no GPU visible (pass --require-gpu to make this a failure)")
        return 0
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        a = torch.ones((256, 256), device=f"cuda:{index}")
        value = float((a @ a)[0, 0].item())
        report(
            value == 256.0,
            f"GPU {index}: {props.name}, {props.total_memory // 2**20} MiB, "
            f"compute capability {props.major}.{props.minor}, matmul gives {value:g}",
        )
    return count


def check_training_step(torch, device: str) -> float:
    """Fit y = 3x + 2 with SGD for a few steps; the loss must fall to under half its start. Returns
    the loop's steps per second."""
    torch.manual_seed(0)
    x = torch.randn(256, 1).to(device)
    y = 3 * x + 2
    model = torch.nn.Linear(1, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    started = time.perf_counter()
    for _ in range(20):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    report(
        losses[-1] < losses[0] / 2,
        f"training step on {device}: loss {losses[0]:.4f} -> {losses[-1]:.4f}",
    )
    return 20 / max(time.perf_counter() - started, 1e-9)


def check_throughput_report(steps_per_second: float) -> None:
    """The platform's throughput contract: the training loop's rate through gpu_platform lands in the
    file the platform names (a temporary one when the test runs outside the platform)."""
    try:
        import gpu_platform
    except Exception as exc:
        report(False, f"import gpu_platform (the throughput helper): {exc}")
        return
    report(*gpu_platform.self_check(steps_per_second))


CHECKPOINT_LOOP = "/opt/gpu-platform/smoke-test/checkpoint.py"


def check_checkpoint_loop() -> None:
    """The base image's preemption loop (SIGTERM -> checkpoint, RESUME=1 -> resume), as every job of
    this image would run it (DESIGN.md section 5b)."""
    if not os.path.exists(CHECKPOINT_LOOP):
        print(f"skip  {CHECKPOINT_LOOP} not found (not built on gpu-platform/base)")
        return
    result = subprocess.run(
        [sys.executable, CHECKPOINT_LOOP, "--self-test"], capture_output=True, text=True, timeout=120
    )
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    report(
        result.returncode == 0,
        "checkpoint on SIGTERM and resume with RESUME=1" + (f": {failed[0]}" if failed else ""),
    )


def check_torch_checkpoint(torch, device: str) -> None:
    """Model and optimizer state through torch.save / torch.load, as a resumed job reads them back."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(8, 4, device=device)).sum().backward()
    optimizer.step()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "state.pt")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 1}, path)
        state = torch.load(path, map_location=device)
    fresh = torch.nn.Linear(4, 2).to(device)
    fresh.load_state_dict(state["model"])
    same = all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True)
    )
    report(
        same and state["step"] == 1, f"torch.save / torch.load round trip of model and optimizer on {device}"
    )


def _all_reduce_worker(rank: int, world_size: int, backend: str, port: int) -> None:
    import torch
    import torch.distributed as dist

    # Our own rendezvous: the platform's MASTER_ADDR/MASTER_PORT describe the job, not this test.
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        tensor = torch.full((1024,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        expected = world_size * (world_size + 1) / 2
        if not torch.all(tensor == expected):
            raise AssertionError(f"rank {rank}: all-reduce gave {tensor[0].item()}, expected {expected}")
    finally:
        dist.destroy_process_group()


def check_all_reduce(torch, backend: str, world_size: int = 2) -> None:
    import torch.multiprocessing as mp

    what = f"{world_size}-process {backend} all-reduce"
    try:
        mp.spawn(_all_reduce_worker, args=(world_size, backend, free_port()), nprocs=world_size, join=True)
    except Exception as exc:  # the workers' traceback is in the exception text
        report(False, f"{what}: {str(exc).strip().splitlines()[-1]}")
        return
    report(True, what)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require-gpu", action="store_true", help="fail when no GPU is visible")
    args = parser.parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        report(False, f"import torch: {exc}")
        return 1
    cuda_build = torch.version.cuda
    print(
        f"info  torch {torch.__version__}, CUDA build {cuda_build or 'none (CPU wheel)'}, Python {sys.version.split()[0]}"
    )
    report(dist.is_available(), "torch.distributed is available")
    # The CUDA base image sets CUDA_VERSION; the CPU twin must not carry the (much larger) CUDA wheel.
    cuda_image = bool(os.environ.get("CUDA_VERSION"))
    report(
        bool(cuda_build) == cuda_image,
        f"{'CUDA' if cuda_build else 'CPU'} build of torch in a {'CUDA' if cuda_image else 'CPU'} image",
    )
    if args.require_gpu and not cuda_build:
        report(False, "--require-gpu given, but this is a CPU-only PyTorch build")
    if cuda_build:
        report(torch.backends.cudnn.is_available(), f"cuDNN {torch.backends.cudnn.version()} is bundled")
        report(dist.is_nccl_available(), f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} is bundled")
    gpus = check_gpus(torch, args.require_gpu) if cuda_build else 0
    try:
        check_throughput_report(check_training_step(torch, "cuda:0" if gpus else "cpu"))
        check_torch_checkpoint(torch, "cuda:0" if gpus else "cpu")
        if gpus >= 2:
            check_all_reduce(torch, "nccl")
        else:
            print(
                "skip  NCCL all-reduce needs two visible GPUs" if cuda_build else "info  CPU build: gloo only"
            )
            check_all_reduce(torch, "gloo")
    except Exception:
        traceback.print_exc()
        report(False, "unexpected error (traceback above)")
    check_checkpoint_loop()
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
