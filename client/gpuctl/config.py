"""Where gpuctl keeps its servers and tokens: one JSON file, mode 0600, in the user's config folder.

``$GPUCTL_CONFIG`` names the file; otherwise ``$XDG_CONFIG_HOME/gpuctl/config.json`` (default
``~/.config/gpuctl/config.json``). It holds named profiles (``{"current": "default", "profiles":
{"default": {"url": ..., "token": ..., "username": ...}}}``), so one user can talk to several
servers. ``GPUCTL_URL`` and ``GPUCTL_TOKEN`` override whatever the file says, for CI and notebooks.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuctl.errors import UsageError

DEFAULT_PROFILE = "default"


def config_path() -> Path:
    explicit = os.environ.get("GPUCTL_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "gpuctl" / "config.json"


@dataclass
class Profile:
    name: str
    url: str
    token: str
    username: str = ""


def load(path: Path | None = None) -> dict[str, Any]:
    path = path or config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {"current": DEFAULT_PROFILE, "profiles": {}}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON (line {exc.lineno}): fix or delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("profiles", {}), dict):
        raise UsageError(f"{path} is not a gpuctl configuration: fix or delete it")
    data.setdefault("profiles", {})
    data.setdefault("current", DEFAULT_PROFILE)
    return data


def save(data: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``data`` atomically; the file is never readable by others, not even for a moment (it
    is created 0600 in a 0700 folder, then renamed into place)."""
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=path.parent)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def store_login(
    *, url: str, token: str, username: str, profile: str | None, path: Path | None = None
) -> Path:
    data = load(path)
    name = profile or DEFAULT_PROFILE
    data["profiles"][name] = {"url": url, "token": token, "username": username}
    data["current"] = name
    return save(data, path)


def forget(profile: str | None, path: Path | None = None) -> Profile | None:
    data = load(path)
    name = profile or data.get("current") or DEFAULT_PROFILE
    entry = data["profiles"].pop(name, None)
    if entry is None:
        return None
    save(data, path)
    return Profile(name=name, **{k: str(entry.get(k, "")) for k in ("url", "token", "username")})


def resolve(profile: str | None = None, url: str | None = None, path: Path | None = None) -> Profile:
    """The server and token to use: ``--url``/``GPUCTL_URL`` and ``GPUCTL_TOKEN`` win over the
    profile (``--profile``, ``GPUCTL_PROFILE``, then the one ``login`` stored last)."""
    data = load(path)
    name = profile or os.environ.get("GPUCTL_PROFILE") or data.get("current") or DEFAULT_PROFILE
    entry = data["profiles"].get(name) or {}
    if profile and not entry:
        known = ", ".join(sorted(data["profiles"])) or "none"
        raise UsageError(
            f"no profile {profile!r} (known: {known}); run: gpuctl login URL --profile {profile}"
        )
    final_url = url or os.environ.get("GPUCTL_URL") or str(entry.get("url", ""))
    token = os.environ.get("GPUCTL_TOKEN") or str(entry.get("token", ""))
    if not final_url:
        raise UsageError("no server configured: run `gpuctl login URL` or set GPUCTL_URL and GPUCTL_TOKEN")
    return Profile(name=name, url=final_url.rstrip("/"), token=token, username=str(entry.get("username", "")))
