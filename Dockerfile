# The platform image: web (gunicorn), Celery worker and beat all run from it (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app/platform:/app \
    DJANGO_SETTINGS_MODULE=config.settings.prod \
    GPU_PLATFORM_VAR_DIR=/app/var \
    SIM_STATE_PATH=/app/var/shared/simulated-cluster.json

WORKDIR /app

# A fixed, unprivileged user: nothing in the container runs as root.
RUN groupadd --system --gid 10001 platform \
 && useradd --system --uid 10001 --gid platform --home-dir /app --shell /usr/sbin/nologin platform

# Dependencies first, so code changes do not reinstall them (psycopg[binary] needs no build tools).
COPY requirements.lock ./
RUN pip install --requirement requirements.lock

COPY --chown=platform:platform . .

# Static files are collected at build time (whitenoise serves them); the secret is only for this step.
RUN mkdir -p /app/var/shared \
 && DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0 \
 && chown -R platform:platform /app/var

USER 10001:10001
EXPOSE 8000

CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
