"""The production settings pass ``manage.py check --deploy`` with the documented variables
(docs/security.md), redirect plain HTTP and send HSTS, and leave the health probe reachable."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

REPO_ROOT = Path(__file__).resolve().parents[2]

# The variables docs/security.md lists as required in production, with example values.
DOCUMENTED_PROD_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings.prod",
    "DJANGO_SECRET_KEY": "k9Vq2sX8pLm4Rt7Wz1Yb6Nc3Hf5Jd0Ge8Ua2Qi7Ko4Sl9Xp1Zr6Tv3Bw5My8Ch0Dn",
    "DJANGO_ALLOWED_HOSTS": "gpu-platform.example.org",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://gpu-platform.example.org",
}


def _prod_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(DOCUMENTED_PROD_ENV)
    env.update(extra)
    return env


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_variables(tmp_path) -> None:
    done = _check_deploy(_prod_env(GPU_PLATFORM_VAR_DIR=str(tmp_path)))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_fails_when_https_is_turned_off(tmp_path) -> None:
    done = _check_deploy(
        _prod_env(
            GPU_PLATFORM_VAR_DIR=str(tmp_path),
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_SECURE_HSTS_SECONDS="0",
        )
    )

    assert done.returncode != 0
    assert "security.W004" in done.stderr + done.stdout
    assert "security.W008" in done.stderr + done.stdout


def test_production_settings_refuse_to_start_without_a_secret_key(tmp_path) -> None:
    env = _prod_env(GPU_PLATFORM_VAR_DIR=str(tmp_path))
    env.pop("DJANGO_SECRET_KEY")

    done = _check_deploy(env)

    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is required" in done.stderr


@pytest.fixture
def prod_security(monkeypatch) -> dict[str, object]:
    """The security settings exactly as config.settings.prod computes them from the documented env."""
    for name, value in DOCUMENTED_PROD_ENV.items():
        if name != "DJANGO_SETTINGS_MODULE":
            monkeypatch.setenv(name, value)
    for name in ("DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_HSTS_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    prod = importlib.reload(importlib.import_module("config.settings.prod"))
    names = [n for n in dir(prod) if n.startswith("SECURE_") or n.endswith("_COOKIE_SECURE")]
    return {name: getattr(prod, name) for name in names}


@pytest.mark.django_db
def test_production_redirects_plain_http_and_sends_hsts_over_https(prod_security) -> None:
    with override_settings(**prod_security, ALLOWED_HOSTS=["gpu-platform.example.org"]):
        client = Client(HTTP_HOST="gpu-platform.example.org")
        plain = client.get("/login/")
        secure = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")

    assert plain.status_code == 301
    assert plain["Location"] == "https://gpu-platform.example.org/login/"
    assert secure.status_code == 200
    hsts = secure["Strict-Transport-Security"]
    assert "max-age=31536000" in hsts and "includeSubDomains" in hsts and "preload" in hsts


@pytest.mark.django_db
def test_production_does_not_redirect_the_health_probe(prod_security) -> None:
    with override_settings(**prod_security, ALLOWED_HOSTS=["10.0.0.5"]):
        response = Client(HTTP_HOST="10.0.0.5").get("/api/v1/health")

    assert response.status_code in {200, 503}
    assert response["Content-Type"].startswith("application/json")
