"""The throughput contract: how a running job tells the platform how fast it goes.

A job reports its progress rate (samples or steps per second, its own unit, as long as it keeps it)
in one of two ways; the platform reads the newest value:

1. **A file.** The platform sets ``GPU_PLATFORM_THROUGHPUT_FILE`` to a path the job may write. The job
   writes one number (e.g. ``123.4``), replacing the content each time (write a temporary file and
   rename it, so a reader never sees half a number). The last non-empty line counts.
2. **A log line.** ``[progress] throughput=123.4`` on stdout or stderr, at the start of a line. The
   last such line in the log counts. Backends that give the platform the log and nothing else (a
   Kubernetes pod) rely on this form.

``gpu_platform.report_throughput(x)`` (``images/gpu_platform``, installed in the standard images)
does the first when the variable is set and the second otherwise. A value must be a finite number
>= 0; anything else is ignored (None), never an error: a job's output cannot break its status.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path

THROUGHPUT_ENV = "GPU_PLATFORM_THROUGHPUT_FILE"
LOG_PREFIX = "[progress] throughput="
# The file lives in the task's working folder (``/workspace`` in a container).
THROUGHPUT_FILE_NAME = ".gpu-platform-throughput"
_LOG_LINE = re.compile(r"^\[progress\] throughput=([^\s]+)\s*$", re.MULTILINE)
# Enough bytes to hold one number; a larger file is not one we wrote the contract for.
_MAX_FILE_BYTES = 4096


def parse_value(text: str) -> float | None:
    """A finite, non-negative number, or None."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_file_text(text: str) -> float | None:
    """The value in a throughput file: its last non-empty line."""
    lines = [line for line in text.splitlines() if line.strip()]
    return parse_value(lines[-1]) if lines else None


def parse_log(text: str) -> float | None:
    """The value of the last well-formed ``[progress] throughput=X`` line of a log, or None."""
    for match in reversed(_LOG_LINE.findall(text.replace("\r\n", "\n").replace("\r", "\n"))):
        value = parse_value(match)
        if value is not None:
            return value
    return None


def read_file(path: Path) -> float | None:
    """The value in the file at ``path``; None when it is missing, too large, unreadable or not a
    regular file. The job controls that path: a symlink is not followed and a FIFO cannot block the
    reader (O_NOFOLLOW, O_NONBLOCK)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_FILE_BYTES:
        return None
    return parse_file_text(data.decode("utf-8", errors="replace"))


def reported_throughput(file: Path | None, log_tail: str) -> float | None:
    """What a task reports: the file when it holds a value, else the newest log line."""
    if file is not None:
        value = read_file(file)
        if value is not None:
            return value
    return parse_log(log_tail)
