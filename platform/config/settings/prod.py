from config.env import env_list, env_str
from config.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env_str("DJANGO_SECRET_KEY")  # required in production: no default
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
