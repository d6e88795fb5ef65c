#!/usr/bin/env python
"""Smoke test of gpu-platform/tensorflow and gpu-platform/tensorflow-cpu. Runs inside the container:

    python /opt/gpu-platform/smoke-test/tensorflow.py [--require-gpu]

Checks, one line each: TensorFlow imports and is the build this image promises (CUDA or CPU); the
GPUs it sees, each running a matrix multiply; a tiny Keras training step whose loss falls; a
tf.train.Checkpoint saved and restored; the base image's preemption loop (checkpoint on SIGTERM,
resume with RESUME=1); a
two-process all-reduce with MultiWorkerMirroredStrategy: NCCL collectives with one GPU per process when
two GPUs are visible, ring (gRPC) collectives on CPU otherwise. Exit status 0 when everything passes,
1 when a check fails, 2 on bad usage. Both variants (GPU and CPU) are built from one Dockerfile
and ship this one file, so it must stay Python 3.10.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

FAILURES: list[str] = []
WORKER_TIMEOUT_S = 300


def report(ok: bool, what: str) -> bool:
    print(f"{'ok   ' if ok else 'FAIL '} {what}")
    if not ok:
        FAILURES.append(what)
    return ok


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def check_gpus(tf, require_gpu: bool) -> int:
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        if require_gpu:
            report(False, "no GPU visible to TensorFlow: run with GPUs and check NVIDIA_VISIBLE_DEVICES")
        else:
            print("skip  no GPU visible (pass --require-gpu to make this a failure)")
        return 0
    for gpu in gpus:
        # Grow memory on demand, so the test never holds a whole GPU another process may share.
        tf.config.experimental.set_memory_growth(gpu, True)
    for index, gpu in enumerate(gpus):
        details = tf.config.experimental.get_device_details(gpu)
        with tf.device(f"/GPU:{index}"):
            a = tf.ones((256, 256))
            value = float(tf.linalg.matmul(a, a)[0, 0].numpy())
        report(
            value == 256.0,
            f"GPU {index}: {details.get('device_name', gpu.name)}, compute capability "
            f"{details.get('compute_capability')}, matmul gives {value:g}",
        )
    return len(gpus)


def check_training_step(tf) -> float:
    """Fit y = 3x + 2 with Keras SGD for a few epochs; the loss must fall to under half its start.
    Returns the epochs (one step each) per second."""
    tf.keras.utils.set_random_seed(0)
    x = tf.random.normal((256, 1))
    y = 3 * x + 2
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.1), loss="mse")
    started = time.perf_counter()
    history = model.fit(x, y, epochs=10, batch_size=256, verbose=0).history["loss"]
    rate = 10 / max(time.perf_counter() - started, 1e-9)
    report(history[-1] < history[0] / 2, f"Keras training step: loss {history[0]:.4f} -> {history[-1]:.4f}")
    return rate


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


def check_tf_checkpoint(tf) -> None:
    """A tf.train.Checkpoint saved and restored, as a resumed job reads its state back."""
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = tf.train.Checkpoint(step=tf.Variable(7, dtype=tf.int64))
        path = checkpoint.save(os.path.join(folder, "ckpt"))
        checkpoint.step.assign(0)
        checkpoint.restore(path)
        restored = int(checkpoint.step.numpy())
    report(restored == 7, f"tf.train.Checkpoint save / restore (step {restored})")


def run_worker(index: int, world_size: int, implementation: str) -> int:
    """One worker of the all-reduce check (TF_CONFIG set by the parent); exit 0 when the sum is right."""
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(
        implementation=getattr(tf.distribute.experimental.CommunicationImplementation, implementation)
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

    @tf.function
    def step():
        context = tf.distribute.get_replica_context()
        value = tf.fill([1024], tf.cast(index + 1, tf.float32))
        return context.all_reduce(tf.distribute.ReduceOp.SUM, value)

    result = strategy.experimental_local_results(strategy.run(step))[0].numpy()
    expected = world_size * (world_size + 1) / 2
    if not (result == expected).all():
        print(f"worker {index}: all-reduce gave {result[0]}, expected {expected}", file=sys.stderr)
        return 1
    return 0


def check_all_reduce(gpus: int, world_size: int = 2) -> None:
    implementation = "NCCL" if gpus >= 2 else "RING"
    what = f"{world_size}-process {implementation} all-reduce (MultiWorkerMirroredStrategy)"
    ports = free_ports(world_size)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    processes = []
    for index in range(world_size):
        env = dict(os.environ)
        # Our own cluster: the platform's variables describe the job, not this test.
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        # One GPU per worker (NCCL), none for ring collectives on CPU.
        env["CUDA_VISIBLE_DEVICES"] = (visible[index] if visible else str(index)) if gpus >= 2 else ""
        command = [sys.executable, __file__, "--worker", str(index), str(world_size), implementation]
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = []
    codes = []
    for process in processes:
        try:
            out, _ = process.communicate(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        outputs.append(out.decode(errors="replace"))
        codes.append(process.returncode)
    if all(code == 0 for code in codes):
        report(True, what)
        return
    for index, (code, out) in enumerate(zip(codes, outputs, strict=True)):
        if code != 0:
            print(f"----- worker {index} (exit {code}) -----\n{out[-4000:]}")
    report(False, f"{what}: worker exit codes {codes}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return run_worker(int(argv[1]), int(argv[2]), argv[3])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require-gpu", action="store_true", help="fail when no GPU is visible")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except Exception as exc:
        report(False, f"import tensorflow: {exc}")
        return 1
    cuda_build = tf.test.is_built_with_cuda()
    build = tf.sysconfig.get_build_info()
    print(
        f"info  tensorflow {tf.__version__}, CUDA build {build.get('cuda_version') or 'none (CPU wheel)'}, "
        f"cuDNN {build.get('cudnn_version') or 'none'}, Python {sys.version.split()[0]}"
    )
    # The CUDA base image sets CUDA_VERSION; the CPU twin must not carry the CUDA build.
    cuda_image = bool(os.environ.get("CUDA_VERSION"))
    report(
        cuda_build == cuda_image,
        f"{'CUDA' if cuda_build else 'CPU'} build of TensorFlow in a {'CUDA' if cuda_image else 'CPU'} image",
    )
    if args.require_gpu and not cuda_build:
        report(False, "--require-gpu given, but this is a CPU-only TensorFlow build")
    gpus = check_gpus(tf, args.require_gpu) if cuda_build else 0
    check_throughput_report(check_training_step(tf))
    check_tf_checkpoint(tf)
    check_checkpoint_loop()
    if gpus < 2:
        print("skip  NCCL all-reduce needs two visible GPUs" if cuda_build else "info  CPU build: ring only")
    check_all_reduce(gpus)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
