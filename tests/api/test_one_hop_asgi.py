"""The ASGI entry point runs Django's middleware chain and view in one thread hop (config.one_hop_asgi)
and answers as Django's own ASGI handler does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from asgiref import sync
from django.core.handlers.asgi import ASGIHandler

from config.one_hop_asgi import OneHopASGIHandler


def _answer_and_hops(handler: ASGIHandler, monkeypatch: pytest.MonkeyPatch, path: str) -> tuple[Any, int]:
    hops = 0
    real_call = sync.SyncToAsync.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await real_call(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get(path)

    try:
        response = asyncio.run(get())
    finally:
        monkeypatch.setattr(sync.SyncToAsync, "__call__", real_call)
    return response, hops


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/api/v1/no-such-endpoint/", "/api/v1/jobs/"])
def test_a_request_crosses_to_a_thread_fewer_times_and_gets_the_same_answer(
    path: str, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    stock, stock_hops = _answer_and_hops(ASGIHandler(), monkeypatch, path)
    ours, our_hops = _answer_and_hops(OneHopASGIHandler(), monkeypatch, path)

    assert ours.status_code == stock.status_code
    assert ours.json() == stock.json()
    assert ours.headers["content-type"] == stock.headers["content-type"]
    # Stock Django hands every MiddlewareMixin hook and the view to a thread one by one; ours
    # enters the whole chain once (plus what the handler itself does around it, as before).
    assert our_hops < stock_hops
    assert stock_hops - our_hops >= 8, (stock_hops, our_hops)
