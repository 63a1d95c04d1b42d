"""The console's web server: Starlette on uvicorn, in a thread of its own.

Routes (every GET reads, only POSTs change anything):

- ``GET /`` the page (or the sign-in page), ``GET /static/...`` its assets (shipped in
  the package: no build step, no CDN);
- ``GET /events`` server-sent events: ``hello`` (everything the page needs), ``parts``
  (batches of new parts), ``status`` (once a second), ``feedback`` (a part an operator
  confirmed or corrected);
- ``GET /frame/<id>.jpg`` a held part's frame; ``GET /api/state`` the ``hello`` document;
- ``POST /login`` (form or JSON ``{"token"}``) sets the session cookie; ``POST /logout``;
- ``POST /api/feedback`` JSON ``{"id", "label", "operator"}``.

With a token configured, everything but ``/``, ``/login`` and the static assets needs
the session cookie or ``Authorization: Bearer <token>``; a bad or missing token is
answered 401 and logged with the client's address. POSTs must come from the page's own
origin (an ``Origin`` header, when sent, must match) and feedback must be JSON, so
another site cannot post on an operator's behalf.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

from inspector.errors import FootageError, MissingDependencyError, StationError
from inspector.station.console.config import ConsoleSection, is_loopback
from inspector.station.console.hub import ConsoleHub

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
COOKIE = "inspector_console"
#: Largest request body accepted (feedback and sign-in are a few hundred bytes).
MAX_BODY = 4096
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob: data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _client(request: Any) -> str:
    c = request.client
    return f"{c.host}:{c.port}" if c else "?"


class Access:
    """Who may use the console: everyone on loopback without a token, else token holders.

    :param token: the configured token, or None (loopback only, checked by the config).
    """

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.sessions: set[str] = set()
        self.refused = 0

    @property
    def open(self) -> bool:
        """No token configured: every request is allowed (loopback only)."""
        return self.token is None

    def token_ok(self, given: str | None) -> bool:
        """Compare in constant time."""
        return bool(self.token and given) and hmac.compare_digest(
            str(given).encode(), self.token.encode()
        )

    def allowed(self, request: Any) -> bool:
        """The request carries a session cookie or a bearer token (or needs none)."""
        if self.open:
            # Without a token only a loopback name may be in Host: a web page that rebinds
            # its own DNS name to 127.0.0.1 must not reach the console through the browser.
            return loopback_host(request.headers.get("host", ""))
        if request.cookies.get(COOKIE) in self.sessions:
            return True
        auth = request.headers.get("authorization", "")
        return auth.startswith("Bearer ") and self.token_ok(auth[7:])

    def deny(self, request: Any) -> Any:
        """Refuse a request that :meth:`allowed` turned down, saying why."""
        why = "not a loopback Host header" if self.open else "bad or missing token"
        return self.refuse(request, why)

    def refuse(self, request: Any, why: str) -> Any:
        """Log and answer 401."""
        from starlette.responses import JSONResponse

        self.refused += 1
        log.warning("console: refused %s %s from %s: %s", request.method, request.url.path,
                    _client(request), why)  # fmt: skip
        return JSONResponse({"error": why}, status_code=401, headers=_HEADERS)


def loopback_host(host: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback (any port)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return is_loopback(name.strip("[]").lower())


def _same_origin(request: Any) -> bool:
    """No ``Origin`` header (not a browser's cross-site request), or the page's own."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin.split("://", 1)[-1] == request.headers.get("host", "")


def build_app(hub: ConsoleHub, access: Access) -> Any:
    """The Starlette application.

    :raises MissingDependencyError: starlette is not installed.
    """
    try:
        from starlette.applications import Starlette
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError:
        raise MissingDependencyError(
            "starlette", "the operator console", "pip install 'inspector[console]'"
        ) from None

    pages = _Pages(hub, access)
    routes = [
        Route("/", pages.index, methods=["GET"]),
        Route("/login", pages.login, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Route("/events", pages.events, methods=["GET"]),
        Route("/api/state", pages.state, methods=["GET"]),
        Route("/api/feedback", pages.feedback, methods=["POST"]),
        Route("/frame/{pid}.jpg", pages.frame, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        task = asyncio.get_running_loop().create_task(hub.run())
        try:
            yield
        finally:
            hub.stop()
            task.cancel()

    return Starlette(routes=routes, lifespan=lifespan)


async def _read_body(request: Any) -> bytes | None:
    """The request body, or None once it passes :data:`MAX_BODY` (read no further)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return body


def _login_token(body: bytes, ctype: str) -> str | None:
    """The token a sign-in carries, as JSON ``{"token"}`` or as a form; None if unreadable."""
    try:
        if ctype.startswith("application/json"):
            return json.loads(body or b"{}").get("token")
        from urllib.parse import parse_qs

        return (parse_qs(body.decode("utf-8")).get("token") or [None])[0]
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None


class _Pages:
    """The console's request handlers (one method a route) over one hub and one access.

    Starlette is imported inside each (see :func:`build_app`, which checks it is there).
    """

    def __init__(self, hub: ConsoleHub, access: Access) -> None:
        self.hub = hub
        self.access = access

    async def index(self, request: Any) -> Any:
        from starlette.responses import FileResponse

        access = self.access
        if access.open and not access.allowed(request):
            return access.deny(request)
        page = "index.html" if access.allowed(request) else "login.html"
        return FileResponse(STATIC / page, headers=_HEADERS)

    async def login(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, RedirectResponse

        access = self.access
        if not _same_origin(request):
            return access.refuse(request, "cross-origin sign-in")
        body = await _read_body(request)
        if body is None:
            return JSONResponse({"error": "request too large"}, status_code=413)
        ctype = request.headers.get("content-type", "")
        token = _login_token(body, ctype)
        if access.open:
            return RedirectResponse("/", status_code=303)
        if not access.token_ok(token):
            if ctype.startswith("application/json"):
                return access.refuse(request, "bad or missing token")
            access.refuse(request, "bad or missing token")
            return RedirectResponse("/?refused=1", status_code=303, headers=_HEADERS)
        sid = secrets.token_urlsafe(32)
        access.sessions.add(sid)
        log.info("console: signed in from %s", _client(request))
        resp = RedirectResponse("/", status_code=303, headers=_HEADERS)
        resp.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/")
        return resp

    async def logout(self, request: Any) -> Any:
        from starlette.responses import RedirectResponse

        self.access.sessions.discard(request.cookies.get(COOKIE, ""))
        resp = RedirectResponse("/", status_code=303, headers=_HEADERS)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    async def state(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        hub = self.hub
        if not self.access.allowed(request):
            return self.access.deny(request)
        return JSONResponse({"info": hub.info(), "status": hub.status(),
                             "parts": [p.doc for p in hub.parts.values()],
                             "review": hub.review_docs()}, headers=_HEADERS)  # fmt: skip

    async def events(self, request: Any) -> Any:
        from starlette.responses import StreamingResponse

        if not self.access.allowed(request):
            return self.access.deny(request)
        headers = dict(_HEADERS, **{"X-Accel-Buffering": "no"})
        stream = self._event_stream(self.hub.subscribe())
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    async def _event_stream(self, q: asyncio.Queue) -> Any:
        """Server-sent events from the hub's queue ``q``, a keep-alive every 15 s."""
        try:
            yield "retry: 1000\n\n"
            while True:
                try:
                    item = await asyncio.wait_for(q.get(), timeout=15.0)
                except asyncio.TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is None:
                    return
                event, data = item
                yield f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
        finally:
            self.hub.unsubscribe(q)

    async def frame(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, Response

        if not self.access.allowed(request):
            return self.access.deny(request)
        data = await self.hub.jpeg(request.path_params["pid"])
        if data is None:
            return JSONResponse({"error": "no such part held"}, status_code=404)
        headers = dict(_HEADERS, **{"Cache-Control": "private, max-age=3600"})
        return Response(data, media_type="image/jpeg", headers=headers)

    async def feedback(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        access = self.access
        if not access.allowed(request):
            return access.deny(request)
        if not _same_origin(request):
            return access.refuse(request, "cross-origin request")
        if not request.headers.get("content-type", "").startswith("application/json"):
            return JSONResponse({"error": "send JSON"}, status_code=415)
        body = await _read_body(request)
        if body is None:
            return JSONResponse({"error": "request too large"}, status_code=413)
        try:
            doc = json.loads(body)
            pid, label, operator = (str(doc[k]) for k in ("id", "label", "operator"))
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "expected JSON {id, label, operator}"}, status_code=400)
        try:
            out = await self.hub.give_feedback(pid, label, operator, _client(request))
        except LookupError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except (ValueError, FootageError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(out, headers=_HEADERS)


class Console:
    """The operator console of one station: call :meth:`start`, :meth:`offer`, :meth:`close`.

    :param station: the running station (read, never changed).
    :param section: the ``console:`` settings.
    :raises ConfigError: the token cannot be resolved.
    """

    def __init__(self, station: Any, section: ConsoleSection) -> None:
        self.section = section
        self.access = Access(section.resolve_token())
        self.hub = ConsoleHub(station, section)
        self.url: str | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def offer(self, result: Any, image: Any) -> None:
        """Hand a reported part over (the station loop's only call; never blocks)."""
        self.hub.offer(result, image)

    def start(self) -> str:
        """Bind, start the server thread; returns the URL.

        :raises MissingDependencyError: starlette or uvicorn is not installed.
        :raises StationError: the address cannot be bound.
        """
        try:
            import uvicorn
        except ImportError:
            raise MissingDependencyError(
                "uvicorn", "the operator console", "pip install 'inspector[console]'"
            ) from None
        app = build_app(self.hub, self.access)
        host, port = self.section.host, int(self.section.port)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise StationError(f"console: cannot listen on {host}:{port}: {exc}") from None
        self._sock = sock
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=1)  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
        )
        self._thread.start()
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        return self.url

    def close(self) -> None:
        """Stop the server and write the feedback still pending (idempotent)."""
        if self._server is not None:
            loop = getattr(self.hub, "_loop", None)
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self.hub.stop)
                except RuntimeError:
                    pass
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            self._server = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.hub.close()
