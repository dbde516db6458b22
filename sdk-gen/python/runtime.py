"""fleetgate_sdk._runtime: what every generated method of the Python SDK goes through (written
once, in sdk-gen/python/runtime.py, copied into the package by generate.py).

- a bearer token from a provider (a string, or a callable taking force_refresh), fetched again
  once when the server answers 401;
- retries with exponential backoff and full jitter on 429/502/503/504 and connection errors,
  honouring Retry-After, only for safe methods or for writes that carry an Idempotency-Key (the
  runtime makes one per call for the operations that take one);
- typed errors from problem+json (type, title, detail, field errors, request id);
- a request id per call (X-Request-Id, the same on every attempt) and the call's timing, given to
  an on_call hook and kept on the Result;
- pagination over `cursor`, an optional ETag cache (If-None-Match; a 304 answers the cached copy),
  log lines from a chunked body, and the change stream (SSE) resumed with Last-Event-ID.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import random
import threading
import time
import urllib.parse
import uuid
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, TypeVar, Union
import os

import httpx

T = TypeVar("T")
SAFE = frozenset(("GET", "HEAD", "OPTIONS"))


# ---- models -------------------------------------------------------------------------------

def _convert(conv, v, out):
    if v is None or conv is None:
        return v
    kind, arg = conv
    if kind == "model":
        from . import models
        cls = models.MODELS[arg]
        return (cls.from_dict(v) if isinstance(v, dict) else v) if out else (v.to_dict() if isinstance(v, Model) else v)
    if kind == "list":
        return [_convert(arg, x, out) for x in v] if isinstance(v, list) else v
    if kind == "dict":
        return {k: _convert(arg, x, out) for k, x in v.items()} if isinstance(v, dict) else v
    return v


class Model:
    """Base of the generated dataclasses: JSON names and nested models in `_fields`."""
    _fields: Dict[str, Any] = {}
    _required: List[str] = []

    @classmethod
    def from_dict(cls, d: Dict[str, Any]):
        known = {}
        extra = dict(d)
        for py, (js, conv) in cls._fields.items():
            if js in d:
                known[py] = _convert(conv, d[js], True)
                extra.pop(js, None)
        return cls(**known, extra=extra)

    def to_dict(self) -> Dict[str, Any]:
        out = dict(getattr(self, "extra", {}) or {})
        for py, (js, conv) in self._fields.items():
            v = getattr(self, py)
            if v is not None:
                out[js] = _convert(conv, v, False)
        return out


def _jsonable(body):
    if isinstance(body, Model):
        return body.to_dict()
    if dataclasses.is_dataclass(body):
        return dataclasses.asdict(body)
    return body


# ---- errors -------------------------------------------------------------------------------

class FleetgateError(Exception):
    """An answer of 4xx/5xx, built from its problem+json."""

    def __init__(self, problem: Dict[str, Any], retry_after: Optional[float] = None):
        self.problem = problem
        self.status = int(problem.get("status") or 0)
        self.type = problem.get("type", "about:blank")
        self.title = problem.get("title", "")
        self.detail = problem.get("detail", "")
        self.instance = problem.get("instance", "")
        self.request_id = problem.get("requestId", "")
        self.errors = problem.get("errors") or []
        self.retry_after = retry_after
        msg = "%s %s%s" % (self.status, self.title, (": " + self.detail) if self.detail else "")
        super().__init__(msg + ((" (request %s)" % self.request_id) if self.request_id else ""))


class BadRequestError(FleetgateError): pass
class UnauthorizedError(FleetgateError): pass
class ForbiddenError(FleetgateError): pass
class NotFoundError(FleetgateError): pass
class ConflictError(FleetgateError): pass
class PreconditionFailedError(FleetgateError): pass
class ValidationError(FleetgateError): pass
class RateLimitedError(FleetgateError): pass
class ServerError(FleetgateError): pass
class UnavailableError(ServerError): pass


class ConnectionError_(Exception):
    """No answer at all (refused, reset, timed out)."""


_BY_STATUS = {400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError,
              409: ConflictError, 412: PreconditionFailedError, 422: ValidationError,
              429: RateLimitedError, 503: UnavailableError}


def error_from(res: httpx.Response, body: bytes, request_id: str) -> FleetgateError:
    try:
        p = json.loads(body)
    except ValueError:
        p = None
    if not isinstance(p, dict) or not isinstance(p.get("type"), str):
        p = {"type": "about:blank", "title": "HTTP %d" % res.status_code, "status": res.status_code,
             "detail": body[:500].decode("utf-8", "replace"), "instance": res.request.url.path}
    p.setdefault("status", res.status_code)
    if not p.get("requestId") and request_id:
        p["requestId"] = request_id
    cls = _BY_STATUS.get(res.status_code) or (ServerError if res.status_code >= 500 else FleetgateError)
    return cls(p, parse_retry_after(res.headers.get("Retry-After")))


# ---- results, hooks, tokens, retries ---------------------------------------------------------

@dataclasses.dataclass
class CallInfo:
    method: str
    url: str
    status: int
    request_id: str
    attempts: int
    duration_ms: float
    retried: List[str]


@dataclasses.dataclass
class Result(Generic[T]):
    data: T
    status: int
    headers: httpx.Headers
    etag: Optional[str]
    request_id: str
    duration_ms: float
    attempts: int
    not_modified: bool = False


@dataclasses.dataclass
class RetryPolicy:
    max_attempts: int = 4
    base_delay: float = 0.1
    max_delay: float = 5.0
    max_retry_after: float = 30.0
    statuses: frozenset = frozenset((429, 502, 503, 504))

    def backoff(self, retry: int) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**retry))."""
        return random.uniform(0, min(self.max_delay, self.base_delay * (2 ** retry)))


def parse_retry_after(v: Optional[str]) -> Optional[float]:
    if not v:
        return None
    v = v.strip()
    if v.isdigit():
        return float(v)
    try:
        return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


TokenProvider = Callable[[bool], str]


def static_token(token: str) -> TokenProvider:
    return lambda force_refresh=False: token


def _jwt_exp(token: str) -> Optional[float]:
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        return float(claims["exp"])
    except (IndexError, KeyError, ValueError, TypeError):
        return None


def refreshing_token(fetch: Callable[[], str], skew: float = 30.0, ttl: float = 300.0) -> TokenProvider:
    """Keeps fetch()'s token until `skew` seconds before its JWT exp (or `ttl`), and fetches a new
    one after a 401."""
    state = {"token": "", "until": 0.0}
    lock = threading.Lock()

    def provider(force_refresh: bool = False) -> str:
        with lock:
            if force_refresh or not state["token"] or time.time() >= state["until"]:
                t = fetch().strip()
                exp = _jwt_exp(t)
                state["token"], state["until"] = t, (exp - skew if exp else time.time() + ttl)
            return state["token"]
    return provider


# ---- streams --------------------------------------------------------------------------------

class LineStream:
    """A log as lines (iterate); close() ends a follow."""

    def __init__(self, cm, res: httpx.Response, request_id: str):
        self._cm, self._res, self.request_id = cm, res, request_id

    def __iter__(self) -> Iterator[str]:
        try:
            for line in self._res.iter_lines():
                yield line.rstrip("\r\n")
        except httpx.HTTPError:
            if not self._res.is_closed:
                raise
        finally:
            self.close()

    def close(self):
        try:
            self._cm.__exit__(None, None, None)
        except httpx.HTTPError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ChangeStream:
    """The change stream's events as dicts (id, type, kind, name, object...). After a
    disconnection it reconnects with Last-Event-ID, so no event is missed; 4xx ends it."""

    def __init__(self, rt: "Runtime", path, query, hdrs, headers, last_event_id, delay):
        self._rt, self._args = rt, (path, query, hdrs, headers)
        self.last_event_id = last_event_id or ""
        self.connections = 0
        self._delay = delay
        self._closed = False
        self._cm = None

    def close(self):
        self._closed = True
        if self._cm is not None:
            try:
                self._cm.__exit__(None, None, None)
            except httpx.HTTPError:
                pass

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        path, query, hdrs, headers = self._args
        retry = self._delay if self._delay is not None else 3.0
        while not self._closed:
            h = dict(hdrs)
            if self.last_event_id:
                h["Last-Event-ID"] = self.last_event_id
            try:
                self.connections += 1
                self._cm, res, _ = self._rt._open("watchChanges", path, query, h, headers)
                ev = {"id": "", "event": "", "data": []}
                for line in res.iter_lines():
                    line = line.rstrip("\r\n")
                    if line == "":
                        if ev["data"]:
                            try:
                                data = json.loads("\n".join(ev["data"]))
                            except ValueError:
                                data = {"raw": "\n".join(ev["data"])}
                            if ev["id"]:
                                self.last_event_id = ev["id"]
                            yield dict({"type": ev["event"] or "message"}, **data, id=ev["id"])
                        ev = {"id": ev["id"], "event": "", "data": []}
                        continue
                    if line.startswith(":"):
                        continue
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "id":
                        ev["id"] = value
                    elif name == "event":
                        ev["event"] = value
                    elif name == "data":
                        ev["data"].append(value)
                    elif name == "retry" and value.isdigit() and self._delay is None:
                        retry = int(value) / 1000.0
            except FleetgateError as e:
                if e.status < 500 and e.status != 429:
                    raise
            except (httpx.HTTPError, ConnectionError_):
                if self._closed:
                    return
            if not self._closed:
                time.sleep(retry)


# ---- the runtime ------------------------------------------------------------------------------

class Runtime:
    def __init__(self, base_url: Optional[str] = None, token: Union[str, TokenProvider, None] = None,
                 retry: Optional[RetryPolicy] = None, on_call: Optional[Callable[[CallInfo], None]] = None,
                 etag_cache: bool = False, timeout: float = 30.0, transport: Optional[httpx.BaseTransport] = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.base_url = (base_url or os.environ.get("FLEETGATE_URL") or "http://127.0.0.1:8080").rstrip("/")
        token = token if token is not None else os.environ.get("FLEETGATE_TOKEN")
        self._token = static_token(token) if isinstance(token, str) else token
        self.retry = retry or RetryPolicy()
        self.on_call = on_call
        self._sleep = sleep
        self._etags: Optional[Dict[str, Any]] = {} if etag_cache else None
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  headers={"User-Agent": "fleetgate-sdk-py/%s" % self.version})

    version = "0"

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _seg(v) -> str:
        return urllib.parse.quote(str(v), safe="")

    def _send(self, method, path, query, headers, content, stream=False):
        """The retry loop; answers (response or stream context, response, info)."""
        headers = {k: v for k, v in headers.items() if v is not None}
        headers.setdefault("X-Request-Id", uuid.uuid4().hex[:16])
        retriable = method in SAFE or any(k.lower() == "idempotency-key" for k in headers)
        params = []
        for k, v in query.items():
            if v is None:
                continue
            for x in (v if isinstance(v, list) else [v]):
                params.append((k, ("true" if x else "false") if isinstance(x, bool) else str(x)))
        started = time.perf_counter()
        retried: List[str] = []
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            if self._token:
                headers["Authorization"] = "Bearer " + self._token(refreshed and retried[-1:] == ["401"])
            req = self._http.build_request(method, path, params=params, headers=headers, content=content)
            try:
                res = self._http.send(req, stream=stream)
            except httpx.TransportError as e:
                if attempt >= self.retry.max_attempts or not retriable:
                    self._report(method, req, 0, headers["X-Request-Id"], attempt, started, retried)
                    raise ConnectionError_("%s %s: %s after %d attempt(s)" % (method, req.url, type(e).__name__, attempt)) from e
                retried.append(type(e).__name__)
                self._sleep(self.retry.backoff(len(retried) - 1))
                continue
            if res.status_code == 401 and self._token and not refreshed:
                refreshed = True
                retried.append("401")
                res.close()
                continue
            wait = parse_retry_after(res.headers.get("Retry-After"))
            if (attempt < self.retry.max_attempts and retriable and res.status_code in self.retry.statuses
                    and (wait is None or wait <= self.retry.max_retry_after)):
                retried.append(str(res.status_code))
                res.close()
                self._sleep(wait if wait is not None else self.retry.backoff(len(retried) - 1))
                continue
            rid = res.headers.get("X-Request-Id", headers["X-Request-Id"])
            info = self._report(method, req, res.status_code, rid, attempt, started, retried)
            return res, info

    def _report(self, method, req, status, rid, attempts, started, retried):
        info = CallInfo(method, str(req.url), status, rid, attempts, (time.perf_counter() - started) * 1000, retried)
        if self.on_call:
            self.on_call(info)
        return info

    def _call(self, op_id, method, path, query, hdrs, extra_headers, body, ctype, model, idempotent, text):
        headers = dict(hdrs)
        headers.update(extra_headers or {})
        if idempotent and not headers.get("Idempotency-Key"):
            headers["Idempotency-Key"] = str(uuid.uuid4())
        content = None
        if body is not None:
            content = json.dumps(_jsonable(body)).encode()
            headers["Content-Type"] = ctype or "application/json"
        key = None
        if self._etags is not None and method == "GET":
            key = str(self._http.build_request(method, path, params={k: v for k, v in query.items() if v is not None}).url)
            hit = self._etags.get(key)
            if hit and not headers.get("If-None-Match"):
                headers["If-None-Match"] = hit[0]
        res, info = self._send(method, path, query, headers, content)
        etag = res.headers.get("ETag")
        base = dict(status=res.status_code, headers=res.headers, etag=etag, request_id=info.request_id,
                    duration_ms=info.duration_ms, attempts=info.attempts)
        if res.status_code == 304:
            hit = self._etags.get(key) if key else None
            return Result(data=hit[1] if hit else None, not_modified=True, **base)
        if res.status_code >= 400:
            raise error_from(res, res.content, info.request_id)
        if text:
            data: Any = res.text
        elif not res.content:
            data = None
        else:
            data = res.json()
            cls = model.get(res.status_code) if model else None
            if isinstance(cls, tuple) and isinstance(data, dict):
                cls = next((c for c in cls if all(r in data for r in c._required)), None)
            if cls is not None and isinstance(data, dict):
                data = cls.from_dict(data)
        if key and etag:
            self._etags.pop(key, None)
            self._etags[key] = (etag, data)
            if len(self._etags) > 1000:
                self._etags.pop(next(iter(self._etags)))
        return Result(data=data, **base)

    def _open(self, op_id, path, query, hdrs, extra_headers):
        headers = dict(hdrs)
        headers.update(extra_headers or {})
        res, info = self._send("GET", path, query, headers, None, stream=True)
        if res.status_code >= 400:
            body = res.read()
            res.close()
            raise error_from(res, body, info.request_id)
        return _Closer(res), res, info

    def _lines(self, op_id, path, query, hdrs, headers) -> LineStream:
        cm, res, info = self._open(op_id, path, query, hdrs, headers)
        return LineStream(cm, res, info.request_id)

    def _events(self, op_id, path, query, hdrs, headers, delay) -> ChangeStream:
        # the spec's Last-Event-ID header parameter is where the stream starts; the stream keeps
        # its own afterwards
        hdrs = dict(hdrs)
        last = None
        for k in list(hdrs):
            if k.lower() == "last-event-id":
                last = hdrs.pop(k)
        return ChangeStream(self, path, query, hdrs, headers, last, delay)

    def pages(self, method: Callable[..., Result], *args, **kwargs) -> Iterator[Result]:
        """The pages of a list method (e.g. fg.list_pods), following `cursor`."""
        while True:
            page = method(*args, **kwargs)
            yield page
            cursor = getattr(page.data, "cursor", None)
            if not cursor:
                return
            kwargs["cursor"] = cursor

    def paginate(self, method: Callable[..., Result], *args, **kwargs) -> Iterator[Any]:
        """Every item of a list method, fetched page by page as the caller iterates."""
        for page in self.pages(method, *args, **kwargs):
            yield from page.data.items or []


class _Closer:
    def __init__(self, res):
        self.res = res

    def __exit__(self, *exc):
        self.res.close()
