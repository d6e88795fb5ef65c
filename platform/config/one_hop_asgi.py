"""Django's ASGI handler with the middleware chain and the view run in one thread hop.

Under ASGI, Django builds the middleware chain in async mode. Each ``MiddlewareMixin`` middleware
then runs its ``process_request`` and ``process_response`` through ``sync_to_async``, a sync-only one
(WhiteNoise) needs ``async_to_sync`` around what it wraps, and the sync view needs one more
``sync_to_async``: about a dozen hand-overs between the event loop and the request's thread for
every request, each a few hundred microseconds of the CPU the web tier's answers wait for. Every view
and middleware of this project is synchronous, so this handler builds the chain in sync mode, the
way WSGI runs it, and enters it once from the event loop; the workspace proxy (asgi.py) stays on the
event loop, in front of Django.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class OneHopASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        # Thread-sensitive: the request's sync code stays on one thread, as Django's own adapters keep it.
        chain = self._middleware_chain  # type: ignore[has-type]
        self._middleware_chain = sync_to_async(chain, thread_sensitive=True)
