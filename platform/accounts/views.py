"""Browser-side sign-in guards: the portal's and the admin's login pages share the token endpoint's
lockout (accounts.throttles.LoginFailures), so no login form is an unlimited password oracle."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from accounts.throttles import client_address, login_failures, submitted_username


def login_throttled(
    view: Callable[..., HttpResponse], *, template_name: str | None = None
) -> Callable[..., HttpResponse]:
    """Wrap a Django login view (LoginView, ``admin.site.login``).

    A POST while the username or the address is locked out gets 429 with ``Retry-After``, without
    checking the password: ``template_name`` rendered with ``lockout_seconds``, or a short page. A
    login view answers a refused POST by showing its form again (200) and a good one with a redirect;
    that is how failures and successes are counted."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        failures = login_failures()
        username = submitted_username(request.POST)
        address = client_address(request)
        wait = failures.locked_for(username=username, address=address)
        if wait is not None:
            response = _locked_out(request, wait, template_name)
            response["Retry-After"] = str(wait)
            return response
        response = view(request, *args, **kwargs)
        if response.status_code == 200:
            failures.record_failure(username=username, address=address)
        elif 300 <= response.status_code < 400 and request.user.is_authenticated:
            failures.record_success(username=username)
        return response

    return wrapped


def _locked_out(request: HttpRequest, wait: int, template_name: str | None) -> HttpResponse:
    if template_name is not None:
        context = {"form": AuthenticationForm(request), "lockout_seconds": wait}
        return TemplateResponse(request, template_name, context, status=429)
    return HttpResponse(
        f"Too many failed logins. Try again in {wait} seconds.\n", status=429, content_type="text/plain"
    )
