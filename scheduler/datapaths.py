"""Where the shared real data lives. Never copied into the repository; commands take it as an argument."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """``$GPU_PLATFORM_DATA`` if set, else ``../shared/data`` beside the checkout."""
    env = os.environ.get("GPU_PLATFORM_DATA")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "data"


def results_dir() -> Path:
    return REPO_ROOT / "docs" / "results"
