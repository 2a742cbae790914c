"""A real OCI registry for the tests (no tests here), on 127.0.0.1, and a registry that lies.

`registry(folder, auth=..., tls=...)` starts Debian's `docker-registry` (the distribution
registry 2.8) on a free port of 127.0.0.1 with a config file of its own: storage on the
filesystem under `folder`, optionally basic auth from an htpasswd file (`htpasswd -Bbn`) and
TLS with a self-signed certificate for IP 127.0.0.1 made by the `openssl` CLI. It waits until
`/v2/` answers (200, or 401 with auth) and stops the registry afterwards (terminate, wait, kill).
The `registries` fixture starts as many as a test asks for, all stopped at its end.

A user reaches a registry that wants credentials with `docker login`; `Registry.login` runs the
real one, with DOCKER_CONFIG naming the folder the credentials go to (docker-py reads the same
file when a client is made with that DOCKER_CONFIG).

What the engine does with these registries (Docker 28.2, measured): every registry on
127.0.0.0/8 is an "insecure registry" to dockerd (`docker info`: Insecure Registries:
127.0.0.0/8). It tries HTTPS first and does not
verify the certificate there, so a TLS registry with a self-signed certificate works without
/etc/docker/certs.d; a plain-HTTP registry works because the engine falls back to HTTP. Basic
auth works over either (the engine sends credentials over plain HTTP to an insecure registry).

`tampering(upstream, repository, digest=…, other=…)` is a proxy on 127.0.0.1 in front of a
registry: it forwards every request, and answers a GET or HEAD of the manifest `digest` with the
bytes of the manifest `other` (the registry "serves a different digest than pinned"), with the
Docker-Content-Digest header claiming `digest`, as a registry that was tampered with, or a cache
gone wrong, would. With `corrupt_layer=DIGEST` it serves that blob with its last byte flipped
(the manifest is right, a layer is not).
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools import missing

START_TIMEOUT = 20.0  # seconds; the registry answers in well under one on an idle machine
START_TRIES = 3
IDENTITY_HEADER = "X-Ninfer-Kits-Test-Registry"
MANIFEST_PATH = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<reference>[^/?]+)(\?.*)?$")
BLOB_PATH = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})(\?.*)?$")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _need(command: str, package: str) -> str:
    path = shutil.which(command)
    if path is None:
        missing(f"{command} ({package})")
        raise AssertionError  # unreachable: missing() raises
    return path


@dataclass(frozen=True)
class Registry:
    """A running registry: where it listens and how to reach it."""

    address: str  # "127.0.0.1:PORT": what image names start with
    user: str | None
    password: str | None
    ca: Path | None  # the self-signed certificate (PEM) when the registry speaks TLS
    storage: Path
    log: Path

    @property
    def scheme(self) -> str:
        return "https" if self.ca else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    def login(self, config_dir: Path, *, user: str | None = None,
              password: str | None = None) -> subprocess.CompletedProcess[str]:
        """`docker login` as a user runs it, its credentials kept in config_dir (DOCKER_CONFIG);
        the registry's own user and password unless others are given. Returns the completed
        process (a refused login exits 1): the caller says what it expects."""
        config_dir.mkdir(parents=True, exist_ok=True)
        user = user if user is not None else self.user or ""
        password = password if password is not None else self.password or ""
        return subprocess.run(
            ["docker", "login", "--username", user, "--password-stdin", self.address],
            input=password, capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "DOCKER_CONFIG": str(config_dir)})

    def connection(self, timeout: float = 10) -> http.client.HTTPConnection:
        """An HTTP connection to the registry, verifying its certificate when it has TLS."""
        host, port = self.address.rsplit(":", 1)
        if self.ca is None:
            return http.client.HTTPConnection(host, int(port), timeout=timeout)
        context = ssl.create_default_context(cafile=str(self.ca))
        return http.client.HTTPSConnection(host, int(port), timeout=timeout, context=context)

    def manifest(self, repository: str, reference: str) -> tuple[bytes, str]:
        """A manifest's bytes and media type, read straight from the registry (not the
        engine): what a tampering proxy serves in place of another."""
        status, headers, body = self.request("GET", f"/v2/{repository}/manifests/{reference}",
                                             {"Accept": MANIFEST_TYPES})
        if status != 200:
            raise AssertionError(f"{self.address}: manifest {repository}@{reference}: "
                                 f"{status} {body[:200]!r}")
        return body, headers.get("content-type", "")

    def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                ) -> tuple[int, dict[str, str], bytes]:
        connection = self.connection()
        try:
            all_headers = {**(headers or {}), **self._basic_auth()}
            connection.request(method, path, headers=all_headers)
            answer = connection.getresponse()
            # Header names lowercased: Go's server spells them its own way (Www-Authenticate).
            headers = {name.lower(): value for name, value in answer.getheaders()}
            return answer.status, headers, answer.read()
        finally:
            connection.close()

    def _basic_auth(self) -> dict[str, str]:
        if self.user is None:
            return {}
        import base64

        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}


MANIFEST_TYPES = ", ".join((
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
))


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for IP 127.0.0.1 (and localhost) signed by its own key: (cert, key)."""
    openssl = _need("openssl", "openssl")
    cert, key = folder / "registry.crt", folder / "registry.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
         "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True, timeout=60)
    return cert, key


def _htpasswd(folder: Path, user: str, password: str) -> Path:
    htpasswd = _need("htpasswd", "apache2-utils")
    # -B: bcrypt, the only hash the distribution registry accepts.
    line = subprocess.run([htpasswd, "-Bbn", user, password], check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()
    path = folder / "htpasswd"
    path.write_text(line + "\n")
    return path


def _config(folder: Path, port: int, htpasswd: Path | None, tls: tuple[Path, Path] | None,
            identity: str) -> Path:
    lines = [
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {folder / 'storage'}",
        "  delete:",
        "    enabled: true",
        "http:",
        f"  addr: 127.0.0.1:{port}",
        f"  secret: {secrets.token_hex(16)}",
        "  headers:",  # on every answer: tells this registry from one that took the port first
        f"    {IDENTITY_HEADER}: [{identity}]",
    ]
    if tls is not None:
        lines += ["  tls:", f"    certificate: {tls[0]}", f"    key: {tls[1]}"]
    if htpasswd is not None:
        lines += ["auth:", "  htpasswd:", "    realm: ninfer-kits-tests", f"    path: {htpasswd}"]
    config = folder / "config.yml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _answers(registry: Registry, identity: str) -> bool:
    try:
        status, headers, _ = registry.request("GET", "/v2/")
    except (OSError, http.client.HTTPException):
        return False
    return status in (200, 401) and headers.get(IDENTITY_HEADER.lower()) == identity


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until_up(process: subprocess.Popen[bytes], registry: Registry, identity: str) -> bool:
    """True once this registry answers /v2/; False when it exited first (its port was taken
    between free_port and its start: another try gets another port)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _answers(registry, identity):
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    log = registry.log.read_text(errors="replace")[-2000:] if registry.log.exists() else ""
    raise AssertionError(f"docker-registry on {registry.address} did not answer /v2/ within "
                         f"{START_TIMEOUT:.0f} s:\n{log}")


def _start(binary: str, folder: Path, found: Registry, config: Path,
           ) -> subprocess.Popen[bytes]:
    with found.log.open("wb") as log:
        return subprocess.Popen([binary, "serve", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=folder)


@contextlib.contextmanager
def registry(folder: Path, *, auth: bool = False, tls: bool = False,
             credentials: tuple[str, str] | None = None) -> Iterator[Registry]:
    """A docker-registry on 127.0.0.1 until the block ends (see the module's docstring).
    `credentials`: the (user, password) auth asks for, instead of made-up ones (the act test's
    registry takes the workflow's actor and token, as GHCR takes a run's GITHUB_TOKEN)."""
    binary = _need("docker-registry", "docker-registry")
    folder.mkdir(parents=True, exist_ok=True)
    user, password = (credentials or ("nk-user", secrets.token_urlsafe(12))) if auth \
        else (None, None)
    htpasswd = _htpasswd(folder, user, password) if user and password else None
    cert_key = _self_signed(folder) if tls else None
    identity = secrets.token_hex(8)
    for _ in range(START_TRIES):
        port = free_port()
        found = Registry(f"127.0.0.1:{port}", user, password, cert_key[0] if cert_key else None,
                         folder / "storage", folder / "registry.log")
        process = _start(binary, folder, found, _config(folder, port, htpasswd, cert_key,
                                                        identity))
        try:
            if _wait_until_up(process, found, identity):
                yield found
                return
        finally:
            _stop(process)
    log = found.log.read_text(errors="replace")[-2000:]
    raise AssertionError(f"docker-registry exited before it answered, {START_TRIES} times; "
                         f"the last log:\n{log}")


@pytest.fixture
def registries(tmp_path: Path) -> Iterator[Callable[..., Registry]]:
    """Starts registries for one test (`registries(auth=True, tls=True)`), each in a folder of
    its own under tmp_path; every one is stopped when the test ends."""
    with contextlib.ExitStack() as stack:
        count = iter(range(1000))

        def start(*, auth: bool = False, tls: bool = False) -> Registry:
            folder = tmp_path / f"registry-{next(count)}"
            return stack.enter_context(registry(folder, auth=auth, tls=tls))

        yield start


# -- the tampering proxy ----------------------------------------------------------------------

@dataclass
class Tampering:
    """A proxy in front of a registry; `address` is what image names start with."""

    address: str
    served_instead: list[str] = field(default_factory=list)  # "METHOD path" of each lie told


class _Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: Registry
    digest: str
    other: tuple[bytes, str]
    corrupt_layer: str
    record: Tampering

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test's output is its assertions, not an access log

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        manifest, blob = MANIFEST_PATH.match(self.path), BLOB_PATH.match(self.path)
        reading = self.command in ("GET", "HEAD")
        if reading and self.digest and manifest and manifest["reference"] == self.digest:
            self._lie()
        elif reading and self.corrupt_layer and blob and blob["digest"] == self.corrupt_layer:
            self.record.served_instead.append(f"{self.command} {self.path}")
            self._forward(corrupt=True)
        else:
            self._forward()

    def _lie(self) -> None:
        body, media_type = self.other
        self.record.served_instead.append(f"{self.command} {self.path}")
        self.send_response(200)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Content-Digest", self.digest)
        self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def _body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _chunked(self) -> bytes:
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(data)
            data += self.rfile.read(size)
            self.rfile.readline()

    def _forward(self, *, corrupt: bool = False) -> None:
        body = self._body()
        # Host is kept: the registry builds the Location of an upload from it, which must
        # point back at this proxy.
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() not in ("transfer-encoding", "content-length", "connection")}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        connection = self.upstream.connection(timeout=60)
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        if corrupt and data:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


@contextlib.contextmanager
def tampering(upstream: Registry, repository: str, *, digest: str = "", other: str = "",
              corrupt_layer: str = "") -> Iterator[Tampering]:
    """A plain-HTTP proxy on 127.0.0.1 in front of `upstream` that answers the manifest
    `digest` (of `repository`) with the bytes of the manifest `other` (a digest or tag of the
    same repository), claiming they are `digest`; and the blob `corrupt_layer` with its last
    byte flipped."""
    body, media_type = upstream.manifest(repository, other) if other else (b"", "")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    record = Tampering(f"127.0.0.1:{server.server_address[1]}")
    handler = type("Handler", (_Proxy,), {"upstream": upstream, "digest": digest,
                                          "other": (body, media_type),
                                          "corrupt_layer": corrupt_layer, "record": record})
    server.RequestHandlerClass = handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
