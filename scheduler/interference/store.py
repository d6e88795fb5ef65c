"""Persistence of trained models: joblib files in a cache folder, never committed.

Default folder ``var/models/`` under the repository root (git-ignored), overridable with the
environment variable ``GPU_PLATFORM_MODEL_DIR``; the platform's model is ``interference.joblib`` there.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from scheduler.datapaths import REPO_ROOT
from scheduler.interference.models import InterferenceModel

MODEL_DIR_ENV = "GPU_PLATFORM_MODEL_DIR"
DEFAULT_MODEL_FILE = "interference.joblib"
FORMAT_VERSION = 1


class ModelError(ValueError):
    """The model file is missing or unusable; the message is one line for the user."""


def default_model_dir() -> Path:
    env = os.environ.get(MODEL_DIR_ENV)
    return Path(env) if env else REPO_ROOT / "var" / "models"


def default_model_path() -> Path:
    return default_model_dir() / DEFAULT_MODEL_FILE


def save_model(model: InterferenceModel, path: Path) -> Path:
    """Write atomically (temp file + rename) so a running scheduler never reads half a file."""
    import joblib  # lazily: only training and loading need it

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    joblib.dump({"format": FORMAT_VERSION, "model": model}, tmp, compress=3)
    tmp.replace(path)
    return path


def load_model(path: Path) -> InterferenceModel:
    if not path.is_file():
        raise ModelError(
            f"model file not found: {path} (train one with `python -m scheduler interference train`)"
        )
    import joblib

    try:
        payload = joblib.load(path)
    except Exception as exc:  # unpickling can fail in many ways; all mean "unusable file"
        raise ModelError(f"cannot read model {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise ModelError(f"{path} is not an interference model of format {FORMAT_VERSION}; retrain it")
    model = payload.get("model")
    if not isinstance(model, InterferenceModel):
        raise ModelError(f"{path} does not hold an InterferenceModel; retrain it")
    return model


_cache_lock = threading.Lock()
_cache: dict[Path, tuple[float, InterferenceModel | None, str]] = {}


def cached_model(path: Path | None = None) -> tuple[InterferenceModel | None, str]:
    """(model, note): the model at ``path`` (default path if None), reloaded when the file changes.

    Never raises: without a usable file the model is None and the note says why, so callers can
    fall back to the analytic estimate and tell the user.
    """
    target = path or default_model_path()
    try:
        mtime = target.stat().st_mtime
    except OSError:
        return None, f"no trained model at {target}"
    with _cache_lock:
        hit = _cache.get(target)
        if hit is not None and hit[0] == mtime:
            return hit[1], hit[2]
        try:
            model: InterferenceModel | None = load_model(target)
            note = ""
        except ModelError as exc:
            model, note = None, str(exc)
        _cache[target] = (mtime, model, note)
        return model, note
