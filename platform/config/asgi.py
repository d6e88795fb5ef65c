"""The ASGI entry point: the workspace proxy (HTTP and WebSocket under /workspaces/<id>/, issue 25)
in front of Django, which serves everything else. ``make run`` serves this through gunicorn's uvicorn
worker; docs/workspaces.md names the production alternatives."""

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

import django  # noqa: E402

django.setup(set_prefix=False)  # what django.core.asgi.get_asgi_application does before its handler

from config.one_hop_asgi import OneHopASGIHandler  # noqa: E402

django_application = OneHopASGIHandler()

from config.web_process_gc import tune_web_process_gc  # noqa: E402
from workspaces.proxy import is_workspace_path, workspace_proxy  # noqa: E402 (needs Django set up)

tune_web_process_gc()  # after every import above: they are the start-up heap it freezes


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    kind = scope["type"]
    if kind in ("http", "websocket") and is_workspace_path(scope["path"]):
        await workspace_proxy(scope, receive, send)
    elif kind == "websocket":
        await send({"type": "websocket.close", "code": 4404})  # no other WebSocket endpoint
    elif kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    else:
        await django_application(scope, receive, send)
