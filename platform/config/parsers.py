"""Request body parsers of the API.

``JSONParser`` refuses bodies nested deeper than ``settings.API_MAX_JSON_DEPTH`` before decoding them:
the standard library's decoder recurses once per level, so ``{"a":`` repeated 5,000 times used to
raise RecursionError (a 500) deep inside the parser, and a body just under the recursion limit would
still reach serializers that recurse over it again. No request the API documents nests beyond a few
levels, so the limit costs legitimate clients nothing.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

# A JSON string literal (escapes included): brackets inside strings do not nest anything.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth_exceeds(text: str, limit: int) -> bool:
    """True when ``text`` opens more than ``limit`` arrays/objects inside one another.

    Counts brackets outside string literals; malformed text is left for the decoder to reject, so a
    stray quote can only make the count wrong for a body the decoder refuses anyway."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with a nesting limit (400 ``parse_error`` beyond it)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = codecs.decode(raw, encoding) if isinstance(raw, bytes) else str(raw)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        limit = int(getattr(settings, "API_MAX_JSON_DEPTH", 32))
        if json_depth_exceeds(text, limit):
            raise ParseError(f"JSON parse error - the body nests deeper than {limit} levels.")
        constant = _refuse_constant if self.strict else None
        try:
            return json.loads(text, parse_constant=constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; DRF's strict mode refuses them the same way.
    raise ValueError(f"{name} is not valid JSON")
