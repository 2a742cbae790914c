"""HTTP for fetch on urllib alone (what the .pyz carries): tokens only to their hosts and never
across a redirect, bounded retries, Range, https only unless the user named an http server, and
a Pace (docs/fetch.md, "What fetch opens"). Bodies are read one recv per read (`read1`), so a
reset loses nothing already received and a resume starts where the bytes stopped.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from http.client import HTTPException, HTTPMessage, HTTPResponse, IncompleteRead
from typing import IO, Any

from ninfer_kits import __version__
from ninfer_kits.errors import BadInput, EnvironmentFailure
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.net.remote import cleartext_token_problem
from ninfer_kits.net.retry import limit_wait

USER_AGENT = f"ninfer-kits/{__version__} (+fetch)"
TIMEOUT = 60.0  # seconds without a byte before a connection counts as dropped
ATTEMPTS = 6  # per request, and per stretch of a download without progress
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)
MAX_WAIT = 60.0  # the longest Retry-After / rate-limit reset we wait for
SMALL_LIMIT = 4 << 20  # SHA256SUMS, BUILDINFO.txt, API answers
# A body slower than MIN_RATE over any RATE_WINDOW stops (4 KiB/s: any real link is faster).
MIN_RATE = 4096
RATE_WINDOW = 60.0
NAMED_SERVERS = ("--api (or the matrix's [publish.github] api), --index or $NINFER_KITS_INDEX, "
                 "$NINFER_KITS_B2_URL")


class HttpFailure(EnvironmentFailure):
    """A request that failed after its retries: the network or the server."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class NotFound(HttpFailure):
    """404 (or 410): the URL names nothing there."""

    exit_code = BadInput.exit_code


class RangeRefused(HttpFailure):
    """A Range answered with other bytes, or 416: the whole file can still come."""


class TooSlow(HttpFailure):
    """A body arriving slower than its Pace allows."""


class RefusedUrl(BadInput):
    """A URL fetch does not open: not https, or plain http to a host nobody named."""


class TooLarge(BadInput):
    """A small file (SHA256SUMS, an API answer, the index) over its bound."""


class UrlPolicy:
    """Which URLs fetch opens, first and after each redirect: https anywhere, http only to a
    host the user named (`servers`), nothing else."""

    def __init__(self, servers: Iterable[str] = ()) -> None:
        self._plain_hosts = frozenset(_hostname(url) for url in servers
                                      if _scheme(url) == "http") - {None}

    def check(self, url: str, *, redirected_from: str | None = None) -> None:
        """RefusedUrl naming the URL (and the one that redirected to it), unless allowed."""
        scheme, host = _scheme(url), _hostname(url)
        if scheme == "https" and host:
            return
        if scheme == "http" and host in self._plain_hosts:
            return
        where = shown(url)
        if redirected_from is not None:
            where = f"{shown(redirected_from)} redirects to {where}"
        why = (f"plain http to {printable(host)}, which no option named as an http server"
               if scheme == "http" and host else "not an https:// URL")
        raise RefusedUrl(f"{where}: {why}: refused (fetch opens https:// URLs only; http:// "
                         f"only on a host named by {NAMED_SERVERS})")


def _scheme(url: str) -> str:
    try:
        return urllib.parse.urlsplit(url).scheme
    except ValueError:
        return ""


def _hostname(url: str) -> str | None:
    try:
        return urllib.parse.urlsplit(url).hostname
    except ValueError:  # an unbalanced [ in an IPv6 host
        return None


@dataclass(frozen=True)
class Pace:
    """At least `rate` bytes a second over every `window` seconds, reconnects included."""

    rate: float
    window: float

    def watch(self, url: str) -> PaceWatch:
        return PaceWatch(self, url)


class PaceWatch:
    """One download against its Pace: `check(received)` after each read and reconnect."""

    def __init__(self, pace: Pace, url: str) -> None:
        self.pace, self.url = pace, url
        self._since, self._from = time.monotonic(), 0

    def check(self, received: int) -> None:
        now = time.monotonic()
        elapsed = now - self._since
        if elapsed < self.pace.window:
            return
        got = received - self._from
        if got < self.pace.rate * elapsed:
            raise TooSlow(f"{shown(self.url)}: too slow: {got} bytes in the last "
                          f"{elapsed:.0f} s, under the {self.pace.rate:.0f} bytes/s a download "
                          f"must keep up", url=self.url)
        self._since, self._from = now, received

    def restart(self, received: int) -> None:
        """A new window from now (the time before was spent waiting on this side)."""
        self._since, self._from = time.monotonic(), received


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, each checked by the policy first (urllib's own follows ftp://)."""

    def __init__(self, policy: UrlPolicy) -> None:
        self._policy = policy

    def http_error_302(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                       headers: HTTPMessage) -> Any:
        location = headers.get("location") or headers.get("uri")
        if location:
            try:
                self._policy.check(urllib.parse.urljoin(req.full_url, location),
                                   redirected_from=req.full_url)
            except RefusedUrl:
                fp.close()
                raise
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _opener(policy: UrlPolicy) -> urllib.request.OpenerDirector:
    """urllib's opener with no file:, ftp: or data: handler."""
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(),
                    urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(),
                    urllib.request.HTTPDefaultErrorHandler(), _CheckedRedirects(policy),
                    urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


@dataclass
class Opened:

    response: HTTPResponse
    url: str  # after redirects
    start: int  # the offset of the body's first byte in the whole file
    total: int | None  # the whole file's size, when the server says it


def shown(url: str) -> str:
    """A URL for messages: no user info or query (signed URLs keep secrets there), escaped."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return printable(urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")))


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


class Client:
    """GETs with retries; `token` only to `token_hosts`, never after a redirect; `servers` the
    http servers the user named (UrlPolicy)."""

    def __init__(self, *, token: str | None = None, token_hosts: Collection[str] = (),
                 servers: Iterable[str] = (), attempts: int = ATTEMPTS,
                 timeout: float = TIMEOUT, pace: Pace | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._token = token
        self._token_hosts = frozenset(_host(h) if "://" in h else h for h in token_hosts)
        self.policy = UrlPolicy(servers)
        self.attempts = attempts
        self.timeout = timeout
        self.pace = pace or Pace(MIN_RATE, RATE_WINDOW)  # the module's values as of now
        self.sleep = sleep
        self._opener = _opener(self.policy)

    @property
    def has_token(self) -> bool:
        return bool(self._token)

    def _request(self, url: str, headers: dict[str, str]) -> urllib.request.Request:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
        if self._token and _host(url) in self._token_hosts and \
                cleartext_token_problem(url) is None:  # never over plain http to another host
            request.add_unredirected_header("Authorization", f"Bearer {self._token}")
        return request

    def open_at(self, url: str, offset: int = 0, *, accept: str | None = None) -> Opened:
        """GET `url` from byte `offset` (Range when > 0); RefusedUrl before any connection."""
        self.policy.check(url)
        headers = {"Accept-Encoding": "identity"}
        if accept:
            headers["Accept"] = accept
        if offset:
            headers["Range"] = f"bytes={offset}-"
        response = self._with_retries(url, headers)
        start, total = _placement(response, offset, url)
        return Opened(response, response.geturl(), start, total)

    def get_bytes(self, url: str, *, accept: str | None = None,
                  limit: int = SMALL_LIMIT) -> bytes:
        """A small file or API answer, whole (at most `limit` bytes)."""
        for attempt in range(1, self.attempts + 1):
            opened = self.open_at(url, accept=accept)
            try:
                with opened.response as response:
                    return self._bounded_body(response, opened.total, url, limit)
            except (OSError, HTTPException) as error:
                if attempt == self.attempts:
                    raise network_failure(url, error) from error
                self.sleep(_backoff(attempt))
        raise AssertionError("unreachable")

    def _bounded_body(self, response: HTTPResponse, total: int | None, url: str,
                      limit: int) -> bytes:
        """The body, no further than one byte past `limit`, at the client's pace."""
        if total is not None and total > limit:  # said before a byte of it is read
            raise TooLarge(f"{shown(url)}: {total} bytes, larger than the "
                           f"{limit} bytes of the small file expected there: refused")
        watch = self.pace.watch(url)
        data = bytearray()
        while chunk := response.read1(limit + 1 - len(data)):
            data += chunk
            if len(data) > limit:
                raise TooLarge(f"{shown(url)}: larger than the {limit} bytes of the "
                               f"small file expected there: refused")
            watch.check(len(data))
        if total is not None and len(data) < total:  # read1 ends a cut body without a word
            raise IncompleteRead(bytes(data), total - len(data))
        return bytes(data)

    def get_json(self, url: str) -> Any:
        data = self.get_bytes(url, accept="application/vnd.github+json")
        try:
            return json.loads(data)
        except ValueError as error:
            raise HttpFailure(f"{shown(url)}: the answer is not JSON ({error})", url=url) \
                from error

    def _with_retries(self, url: str, headers: dict[str, str]) -> HTTPResponse:
        for attempt in range(1, self.attempts + 1):
            try:
                response: HTTPResponse = self._opener.open(self._request(url, headers),
                                                           timeout=self.timeout)
                return response
            except urllib.error.HTTPError as error:
                wait = self._should_retry(error, url, attempt)
                error.close()
                self.sleep(wait)
            except (urllib.error.URLError, OSError, HTTPException) as error:
                if attempt == self.attempts or _permanent(error):
                    raise network_failure(url, error) from error
                self.sleep(_backoff(attempt))
        raise AssertionError("unreachable")

    def _should_retry(self, error: urllib.error.HTTPError, url: str, attempt: int) -> float:
        """Seconds to wait before the next attempt, or raise: the error is final."""
        status = error.code
        where = shown(error.geturl() or url)
        # a Retry-After that is neither seconds nor a date waits the usual backoff
        limited = limit_wait(status, dict((error.headers or {}).items()), time.time(),
                             unreadable=_backoff(attempt))
        if status in (404, 410):
            raise NotFound(f"{where}: not found (HTTP {status})", url=url, status=status)
        if status == 416:
            raise RangeRefused(f"{where}: the server refused the byte range asked for "
                               f"(HTTP 416)", url=url, status=status)
        retryable = status >= 500 or status == 429 or limited is not None
        if not retryable or attempt == self.attempts:
            raise HttpFailure(self._status_words(where, status, error, limited), url=url,
                              status=status)
        wait = limited if limited is not None else _backoff(attempt)
        if wait > MAX_WAIT:
            raise HttpFailure(self._status_words(where, status, error, wait), url=url,
                              status=status)
        return wait

    def _status_words(self, where: str, status: int, error: urllib.error.HTTPError,
                      wait: float | None) -> str:
        if wait is not None and status in (403, 429):
            token = "" if self._token else (" (without a token: set GITHUB_TOKEN or GH_TOKEN "
                                            "for a higher limit)")
            return (f"{where}: rate limited (HTTP {status}); it resets in {wait:.0f} s{token}")
        if status in (401, 403):
            hint = ("the token in GITHUB_TOKEN/GH_TOKEN was refused or cannot read it"
                    if self._token else "set GITHUB_TOKEN or GH_TOKEN if the release is not "
                                        "public")
            return f"{where}: HTTP {status} {printable(str(error.reason))}: {hint}"
        return (f"{where}: HTTP {status} {printable(str(error.reason))} (after {self.attempts} "
                f"attempts)")


def _placement(response: HTTPResponse, offset: int, url: str) -> tuple[int, int | None]:
    """(where the body starts in the whole file, the file's size if known)."""
    length = response.headers.get("Content-Length")
    size = int(length) if length and length.isdigit() else None
    if response.status == 206:
        content_range = response.headers.get("Content-Range", "")
        unit, _, spec = content_range.partition(" ")
        span, _, whole = spec.partition("/")
        first, _, _ = span.partition("-")
        if unit != "bytes" or not first.isdigit() or int(first) != offset:
            response.close()
            raise RangeRefused(f"{shown(url)}: answered a Range request for byte {offset} with "
                               f"Content-Range {content_range!r}", url=url, status=206)
        return offset, int(whole) if whole.isdigit() else None
    return 0, size


def _backoff(attempt: int) -> float:
    return BACKOFF[min(attempt - 1, len(BACKOFF) - 1)]


def _permanent(error: BaseException) -> bool:
    """Errors that another attempt will not fix: a bad certificate, an unknown scheme."""
    reason = getattr(error, "reason", error)
    return isinstance(reason, ssl.SSLCertVerificationError | ValueError)


def network_failure(url: str, error: BaseException) -> HttpFailure:
    reason = getattr(error, "reason", error)
    if isinstance(reason, ssl.SSLCertVerificationError):
        words = (f"the TLS certificate cannot be verified ({reason.verify_message}); install "
                 f"the CA certificates (apt-get install ca-certificates) or set SSL_CERT_FILE")
    elif isinstance(reason, socket.gaierror):
        words = f"cannot resolve the host ({reason.strerror})"
    elif isinstance(reason, TimeoutError | socket.timeout):
        words = "timed out"
    elif isinstance(reason, OSError) and reason.strerror:
        words = reason.strerror.lower() if reason.strerror[0].isupper() else reason.strerror
    else:
        words = str(reason) or type(reason).__name__
    return HttpFailure(f"{shown(url)}: {words}", url=url)

