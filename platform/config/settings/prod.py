"""Production settings: everything secret or site-specific comes from the environment (documented in
docs/security.md); ``manage.py check --deploy`` passes with those variables set."""

from config.env import env_bool, env_int, env_list, env_str
from config.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env_str("DJANGO_SECRET_KEY")  # required in production: no default
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# TLS ends at a proxy that says so in X-Forwarded-Proto; requests that arrive over plain HTTP are
# redirected, except the health probe, which kubelets and load balancers call on the pod directly.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The local backend must not run untrusted users' jobs as the platform's own user (jobs.checks).
LOCAL_ISOLATION_REQUIRED = True
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health/?$"]
# HSTS: browsers then refuse plain HTTP to this host for a year. DJANGO_SECURE_HSTS_SECONDS=0 turns
# it off (a deployment still on HTTP, such as docker compose on localhost).
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", True)
