"""Persistence of trained models: joblib files in a cache folder, never committed.

Default folder ``var/models/`` under the repository root (git-ignored), overridable with the
environment variable ``GPU_PLATFORM_MODEL_DIR``; the platform's model is ``interference.joblib`` there.

For result provenance the store remembers, per process, every model file it loaded
(``loaded_models``: path, file hash, content hash) and every reason it had to fall back to the analytic
estimate (``fallback_notes``); ``set_fallback_listener`` lets a command tell the user the first time.
``model_content_hash`` identifies what a model computes, not its file: the file also holds the training
time, so two trainings of the same data give different files but the same content hash.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.datapaths import REPO_ROOT
from scheduler.interference.models import InterferenceModel

MODEL_DIR_ENV = "GPU_PLATFORM_MODEL_DIR"
DEFAULT_MODEL_FILE = "interference.joblib"
FORMAT_VERSION = 1
# The one line commands print when they fall back; `make models` is how a new user gets the model.
FALLBACK_HINT = "run `make models` to train it"


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
    with _record_lock:
        _loaded[str(path)] = (path, model)
    return model


# Attributes that do not change a prediction: when and where it was trained, and the thread count
# scikit-learn's binner remembers from fitting (a model fitted with --threads 2 predicts the same).
_VOLATILE = frozenset({"created", "meta", "n_threads"})


def model_content_hash(model: InterferenceModel) -> str:
    """sha256 over the model's state walked in a fixed order (sorted attribute names, arrays by dtype,
    shape and bytes, floats by repr), leaving out ``_VOLATILE`` attributes.

    Not the pickle's hash: pickling the same values can produce different bytes (shared objects are
    memoised or not depending on how they were built), so equal models would hash apart."""
    h = hashlib.sha256()
    _walk(model, h, [])
    return h.hexdigest()


def _walk(obj: Any, h: Any, path: list[int]) -> None:
    if obj is None or isinstance(obj, bool | int | float | str | bytes | np.generic):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, np.ndarray):
        h.update(f"nd:{obj.dtype.str}:{obj.shape};".encode())
        if obj.dtype.hasobject:
            for item in obj.ravel(order="C"):
                _walk(item, h, path)
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
        return
    if isinstance(obj, dict):
        h.update(f"dict:{len(obj)};".encode())
        for key in sorted(obj, key=repr):
            if key in _VOLATILE:
                continue
            h.update(f"k:{key!r};".encode())
            _walk(obj[key], h, path)
        return
    if isinstance(obj, list | tuple | set | frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        h.update(f"{type(obj).__name__}:{len(obj)};".encode())
        for item in items:
            _walk(item, h, path)
        return
    if id(obj) in path:  # a cycle; shared but acyclic objects are walked each time they appear
        h.update(b"cycle;")
        return
    h.update(f"obj:{type(obj).__module__}.{type(obj).__qualname__};".encode())
    state = obj.__getstate__() if hasattr(obj, "__getstate__") else getattr(obj, "__dict__", None)
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
        state = {**(state[0] or {}), **state[1]}  # (dict, slots) form of __getstate__
    path.append(id(obj))
    _walk(state if isinstance(state, dict) else {"state": state}, h, path)
    path.pop()


_record_lock = threading.Lock()
_loaded: dict[str, tuple[Path, InterferenceModel]] = {}
_fallbacks: list[str] = []
_listener: Callable[[str], None] | None = None


def loaded_models() -> list[dict[str, Any]]:
    """Every model file this process loaded: path, file and content sha256, what it is, when trained."""
    from scheduler.provenance import sha256_file

    with _record_lock:
        items = list(_loaded.values())
    out = []
    for path, model in items:
        out.append(
            {
                "path": str(path),
                "file_sha256": sha256_file(path) if path.is_file() else None,
                "content_sha256": model_content_hash(model),
                "describe": model.describe(),
                "datasets": list(model.datasets),
                "created": model.created,
                "sklearn_version": model.sklearn_version,
            }
        )
    return out


def fallback_notes() -> list[str]:
    """Distinct reasons, in order, why a prediction in this process used the analytic estimate."""
    with _record_lock:
        return list(_fallbacks)


def set_fallback_listener(listener: Callable[[str], None] | None) -> None:
    """``listener(note)`` is called the first time each distinct fallback reason occurs."""
    global _listener
    with _record_lock:
        _listener = listener


def reset_records() -> None:
    """Forget loads and fallbacks (a command starting a fresh run in a long-lived process; tests)."""
    with _record_lock:
        _loaded.clear()
        _fallbacks.clear()


def _note_fallback(note: str) -> None:
    with _record_lock:
        if note in _fallbacks:
            return
        _fallbacks.append(note)
        listener = _listener
    if listener is not None:
        listener(note)


def fallback_message(note: str, command: str) -> str:
    """The one line a command prints when it falls back: what is missing, what happens, the fix."""
    return f"warning: {command}: {note}; using the analytic interference estimate instead ({FALLBACK_HINT})"


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
        note = f"no trained model at {target}"
        _note_fallback(note)
        return None, note
    with _cache_lock:
        hit = _cache.get(target)
        if hit is not None and hit[0] == mtime:
            model, note = hit[1], hit[2]
        else:
            try:
                model = load_model(target)
                note = ""
            except ModelError as exc:
                model, note = None, str(exc)
            _cache[target] = (mtime, model, note)
    if model is None:
        _note_fallback(note)
    else:
        with _record_lock:  # a cache hit after reset_records() still counts as used by this run
            _loaded.setdefault(str(target), (target, model))
    return model, note
