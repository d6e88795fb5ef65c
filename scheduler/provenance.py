"""What a result was made from: code commit, interference model, data files and numeric environment.

``collect(data_files)`` returns the ``provenance`` block every result JSON of ``python -m scheduler
simulate`` and ``frag`` carries::

    {"code": {"commit": "<git HEAD>" | null, "dirty": bool | null, "dirty_paths": [...]},
     "interference_model": [{"path", "file_sha256", "content_sha256", "describe", ...}] | null,
     "interference_fallback": "<why the analytic estimate was used>" | null,
     "data": [{"path", "bytes", "sha256"}, ...],
     "environment": {"python", "numpy", "scikit-learn", "openblas_coretype", "numpy_simd", "cpu", ...}}

``interference_model`` lists the model files the process actually loaded (``interference.store``), so
a run whose policies never needed a prediction records null and no fallback. The environment is
recorded because the decisions depend on it: the FGD fragmentation scores use a BLAS matrix-vector
product whose rounding depends on the kernel OpenBLAS picks for the CPU (and NumPy's SIMD level
changes the last bits of some ufuncs), and near-ties between nodes then go the other way. Pinning
``OPENBLAS_CORETYPE`` (``python -m scheduler results run`` does) removes the first source.
"""

from __future__ import annotations

import hashlib
import os
import platform as _platform
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scheduler.datapaths import REPO_ROOT

# Environment variables that change floating-point results; recorded whenever set.
NUMERIC_ENV = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NPY_DISABLE_CPU_FEATURES",
    "NPY_ENABLE_CPU_FEATURES",
    "PYTHONHASHSEED",
)

_digests: dict[tuple[str, int, int], str] = {}


def sha256_file(path: Path) -> str:
    """Hex sha256 of the file's bytes, memoised per (path, size, mtime) within the process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    hit = _digests.get(key)
    if hit is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        hit = _digests[key] = h.hexdigest()
    return hit


def data_file(path: Path) -> dict[str, Any]:
    """Path as given, size and content hash (no mtime: a copy of the same bytes is the same data)."""
    if not path.is_file():
        return {"path": str(path), "bytes": None, "sha256": None}
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def code_state(repo: Path = REPO_ROOT) -> dict[str, Any]:
    """HEAD commit and whether tracked files differ from it; nulls outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        status = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "dirty_paths": []}
    if head.returncode != 0 or status.returncode != 0:
        return {"commit": None, "dirty": None, "dirty_paths": []}
    paths = sorted(line[3:] for line in status.stdout.splitlines() if line.strip())
    return {"commit": head.stdout.strip(), "dirty": bool(paths), "dirty_paths": paths[:50]}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def environment() -> dict[str, Any]:
    """Library versions and the numeric kernels in use (see the module docstring for why)."""
    import numpy as np

    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "machine": _platform.machine(),
        "cpu": _cpu_model(),
    }
    try:
        import sklearn

        env["scikit-learn"] = sklearn.__version__
    except ImportError:
        env["scikit-learn"] = None
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        env["numpy_simd"] = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    except ImportError:  # private module moved in some NumPy version: not worth failing a run
        env["numpy_simd"] = None
    try:
        from threadpoolctl import threadpool_info

        env["blas"] = sorted(
            {
                f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                for i in threadpool_info()
                if i.get("user_api") == "blas"
            }
        )
    except ImportError:
        env["blas"] = None
    env["variables"] = {k: os.environ[k] for k in NUMERIC_ENV if k in os.environ}
    return env


def collect(data_files: Iterable[Path]) -> dict[str, Any]:
    """The ``provenance`` block for a result JSON; call it after the run (models load lazily)."""
    from scheduler.interference.store import fallback_notes, loaded_models

    models = loaded_models()
    notes = fallback_notes()
    seen: set[str] = set()
    data = []
    for path in data_files:
        if str(path) not in seen:
            seen.add(str(path))
            data.append(data_file(path))
    return {
        "code": code_state(),
        "interference_model": models or None,
        "interference_fallback": "; ".join(notes) if notes else None,
        "data": data,
        "environment": environment(),
    }
