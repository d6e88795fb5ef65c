"""Report a job's throughput to the GPU platform that runs it.

    import gpu_platform
    gpu_platform.report_throughput(samples_per_second)

The platform sets ``GPU_PLATFORM_THROUGHPUT_FILE``; the value is written there (to a temporary file
renamed over it, so the platform never reads half a number). Without that variable (an older
backend, a run outside the platform) the documented log line ``[progress] throughput=123.4`` goes to
stdout instead, which the platform parses from the job's log. Use one unit (samples or steps per
second) for the whole run: the platform compares a job's rate while sharing a GPU with its rate
alone. No dependencies, Python 3.8+, so it installs into any image.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile

__all__ = ["THROUGHPUT_ENV", "report_throughput", "self_check"]
__version__ = "0.1.0"

THROUGHPUT_ENV = "GPU_PLATFORM_THROUGHPUT_FILE"


def report_throughput(value: float) -> None:
    """Tell the platform the job's current throughput (a finite number >= 0).

    Raises ValueError for anything else, so a mistake shows in the job rather than as a silently
    missing number on the platform's side."""
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"throughput must be a finite number >= 0, got {value!r}")
    path = os.environ.get(THROUGHPUT_ENV, "")
    if not path:
        print(f"[progress] throughput={x:.6g}", file=sys.stdout, flush=True)
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".throughput-", dir=folder)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{x:.6g}\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def self_check(value: float) -> tuple[bool, str]:
    """Report ``value`` and read it back from the platform's file (a temporary one outside the
    platform): the images' smoke tests call this, so every image checks the contract the same way."""
    given = os.environ.get(THROUGHPUT_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        path = given or os.path.join(tmp, "throughput")
        os.environ[THROUGHPUT_ENV] = path
        try:
            report_throughput(value)
            with open(path) as fh:
                written = float(fh.read().split()[-1])
        except Exception as exc:  # noqa: BLE001  (the smoke test reports any failure as one line)
            return False, f"report_throughput: {exc}"
        finally:
            if given is None:
                del os.environ[THROUGHPUT_ENV]
    return written > 0, f"throughput reported to the platform: {written:g} steps/s"
