"""The authenticated reverse proxy under ``/workspaces/<id>/``: HTTP and WebSocket, as an ASGI app
in front of Django (config.asgi). docs/workspaces.md has the contract; in short:

- The caller is the user of the platform's session cookie; only an owner or member of the
  workspace's team gets through (workspaces.access), everyone else a 404, as for any other job.
- The app's token is added here (``Authorization: token ...``) and the platform's own cookies are
  taken out, so neither the token reaches the browser nor the session cookie reaches the app.
- The path is forwarded unchanged: the app serves under the same base URL (``$(..._BASE_URL)``).
- The last request per workspace is recorded for the idle culler (workspaces.culling), at most every
  ``ACTIVITY_WRITE_SECONDS`` per process: a busy notebook polls several times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from importlib import import_module
from typing import Any
from urllib.parse import quote

import httpx
import websockets
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404
from django.utils import timezone

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PATH = re.compile(r"^/workspaces/(?P<job_id>[0-9]{1,18})(?P<rest>/.*)?$")
ACTIVITY_WRITE_SECONDS = 30.0
# Never forwarded in either direction (RFC 9110 §7.6.1), or set by the proxy itself.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "authorization",
}  # fmt: skip
# WebSocket handshake headers the client library writes itself.
WS_OWN = HOP_BY_HOP | {
    "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol",
    "origin", "cookie", "content-length",
}  # fmt: skip

_last_write: dict[int, float] = {}


def is_workspace_path(path: str) -> bool:
    return PATH.match(path) is not None


@dataclass(frozen=True)
class Opened:
    job_id: int
    target: str
    token: str


def _platform_cookies() -> set[str]:
    return {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME}


def _user_of(cookie_header: str) -> Any:
    """The signed-in user of the session cookie, or None."""
    from django.contrib.auth import get_user

    cookies = SimpleCookie()
    with contextlib.suppress(Exception):
        cookies.load(cookie_header)
    morsel = cookies.get(settings.SESSION_COOKIE_NAME)
    if morsel is None:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(morsel.value)

    class _Request:  # what django.contrib.auth.get_user reads
        session = store

    user = get_user(_Request())  # type: ignore[arg-type]
    return user if user.is_authenticated else None


def _open(job_id: int, cookie_header: str) -> Opened | str | None:
    """The workspace's target for the caller; "login" for no session; None for a 404; "down" when the
    workspace is the caller's but does not serve now."""
    from workspaces.access import workspace_for_user, workspace_token
    from workspaces.targets import workspace_target

    user = _user_of(cookie_header)
    if user is None:
        return "login"
    try:
        job = workspace_for_user(user=user, job_id=job_id)
    except Http404:
        return None
    target = workspace_target(job)
    if target is None:
        return "down"
    return Opened(job_id=job.pk, target=target, token=workspace_token(job.pk))


def _record_activity(job_id: int) -> None:
    from workspaces.models import WorkspaceActivity

    WorkspaceActivity.objects.update_or_create(job_id=job_id, defaults={"last_request_at": timezone.now()})


async def _touch(job_id: int) -> None:
    now = time.monotonic()
    if now - _last_write.get(job_id, -ACTIVITY_WRITE_SECONDS) >= ACTIVITY_WRITE_SECONDS:
        _last_write[job_id] = now
        await sync_to_async(_record_activity)(job_id)


def _headers(scope: Scope) -> list[tuple[str, str]]:
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]


def _forwarded_cookie(header: str) -> str:
    """The Cookie header without the platform's own cookies."""
    drop = _platform_cookies()
    kept = [part.strip() for part in header.split(";") if part.strip().split("=", 1)[0] not in drop]
    return "; ".join(p for p in kept if p)


def _upstream_url(target: str, scope: Scope, *, websocket: bool = False) -> str:
    base = target.replace("http://", "ws://", 1).replace("https://", "wss://", 1) if websocket else target
    query = scope.get("query_string", b"").decode("latin-1")
    # The path as the browser sent it (an encoded slash in a file name stays encoded).
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope["path"], safe="/%:@!$&'()*+,;=-._~")
    return base + path + (f"?{query}" if query else "")


async def _answer(
    send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope: Scope, send: Send, opened: Opened | str | None) -> None:
    """The answer when the caller does not get through: a login redirect, a 404, or a 503."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 4404 if opened is None else 1013})
        return
    if opened == "login":
        location = f"{settings.LOGIN_URL}?next={quote(scope['path'])}"
        await _answer(send, 302, "Sign in first.", [(b"location", location.encode())])
    elif opened == "down":
        await _answer(send, 503, "This workspace is not running now; see its job page for why.")
    else:
        await _answer(send, 404, "No workspace with this id.")


async def workspace_proxy(scope: Scope, receive: Receive, send: Send) -> None:
    match = PATH.match(scope["path"])
    assert match is not None  # config.asgi routes only workspace paths here
    cookie = "; ".join(v for k, v in _headers(scope) if k == "cookie")
    opened = await sync_to_async(_open)(int(match["job_id"]), cookie)
    if not isinstance(opened, Opened):
        await _refuse(scope, send, opened)
        return
    await _touch(opened.job_id)
    if scope["type"] == "websocket":
        await _websocket(scope, receive, send, opened)
    else:
        await _http(scope, receive, send, opened)


async def _http(scope: Scope, receive: Receive, send: Send, opened: Opened) -> None:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body.extend(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = [(k, v) for k, v in _headers(scope) if k not in HOP_BY_HOP and k != "cookie"]
    if cookie := _forwarded_cookie("; ".join(v for k, v in _headers(scope) if k == "cookie")):
        headers.append(("cookie", cookie))
    headers.append(("authorization", f"token {opened.token}"))
    # Unencoded answers, so a page can be read for the token (the hop upstream is a local one).
    headers = [(k, v) for k, v in headers if k != "accept-encoding"] + [("accept-encoding", "identity")]
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        request = client.build_request(
            scope["method"], _upstream_url(opened.target, scope), headers=headers, content=bytes(body)
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError:
            await _answer(send, 502, "The workspace's server does not answer yet; try again in a moment.")
            return
        try:
            out = [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in response.headers.multi_items()
                if k.lower() not in HOP_BY_HOP
            ]
            if response.headers.get("content-type", "").startswith("text/html"):
                # JupyterLab writes the server's token into its page (page config): taken out here,
                # the page works without it, as every request through the proxy carries it anyway.
                page = (await response.aread()).replace(opened.token.encode(), b"")
                out = [(k, v) for k, v in out if k.lower() != b"content-length"]
                out.append((b"content-length", str(len(page)).encode()))
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                await send({"type": "http.response.body", "body": page})
                return
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


async def _websocket(scope: Scope, receive: Receive, send: Send, opened: Opened) -> None:
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    headers = [(k, v) for k, v in _headers(scope) if k not in WS_OWN]
    if cookie := _forwarded_cookie("; ".join(v for k, v in _headers(scope) if k == "cookie")):
        headers.append(("cookie", cookie))
    headers.append(("authorization", f"token {opened.token}"))
    try:
        upstream = await websockets.connect(
            _upstream_url(opened.target, scope, websocket=True),
            additional_headers=headers,
            # The app checks Origin against its own host: it is the app's origin that reaches it.
            origin=websockets.Origin(opened.target),  # type: ignore[attr-defined]
            subprotocols=[websockets.Subprotocol(p) for p in scope.get("subprotocols", [])],  # type: ignore[attr-defined]
            max_size=None,
            open_timeout=10,
        )
    except (TimeoutError, OSError, websockets.WebSocketException):
        await send({"type": "websocket.close", "code": 1011})
        return
    await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

    async def client_to_app() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await _touch(opened.job_id)
            payload = message.get("text") if message.get("text") is not None else message.get("bytes")
            if payload is not None:
                await upstream.send(payload)

    async def app_to_client() -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for payload in upstream:
                if isinstance(payload, str):
                    await send({"type": "websocket.send", "text": payload})
                else:
                    await send({"type": "websocket.send", "bytes": payload})
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": 1000})

    tasks = [asyncio.ensure_future(client_to_app()), asyncio.ensure_future(app_to_client())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await upstream.close()
