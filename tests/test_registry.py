"""Toolchain images to and from a real OCI registry, by digest (issue 40, item 4).

Every test starts Debian's docker-registry on 127.0.0.1 (tests/registry_server.py: plain, TLS,
basic auth) and moves tiny images (`docker import` of a one-file tar, 32 bytes, a content of
their own each) through the real Docker engine with ninfer_kits.oci.transfer, as the docker
builder does. Digests are checked end to end: the registry's own manifest hashes to the digest
the push handed back, and the image pulled by that digest has the pushed image's ID. A registry
that is down, refuses the credentials, lacks the pin or serves another manifest gets its own
error, through the API and through `ninfer-kits build --builder docker`, which then builds
nothing. Credentials come from `docker login` (DOCKER_CONFIG), as a user's do.

Cost: about 1 s a test (a registry starts in ~0.1 s; a push and a pull of a tiny image take
~0.3 s each); the CLI cases run `ninfer-kits build`, which fails in its preflight (~0.8 s).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import secrets
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import registry_server
from ninfer_kits.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.oci.reference import ImageReference, parse_pin
from ninfer_kits.oci.transfer import (
    DigestMismatch,
    PinNotFound,
    RegistryRefused,
    RegistryUnreachable,
    pull_pinned,
    push_image,
)
from registry_server import Registry, registries, registry, tampering

from docker_fixtures import ensure_engine

__all__ = ["registries"]  # the fixture, for pytest

# Every image these tests make or pull is named so, and removed after each test. The token is
# the process's: CI runs this file on two Pythons at once against one engine, and one process
# must not remove what the other is using.
PREFIX = f"nk-regtest-{secrets.token_hex(3)}-"
WHAT = "toolchain image of toolchain regtest"


@pytest.fixture
def no_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A docker config folder with no credentials in it (this machine's own ~/.docker is not
    the test's business)."""
    folder = tmp_path / "docker-config"
    folder.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    return folder


def _client() -> Any:
    """A client as ninfer-kits makes one: docker-py reads DOCKER_CONFIG's credentials now."""
    docker = pytest.importorskip("docker")
    ensure_engine()
    return docker.from_env()


@pytest.fixture
def client(no_login: Path) -> Iterator[Any]:
    made = _client()
    yield made
    _remove_ours(made)
    made.close()


def held(client: Any) -> dict[str, list[str]]:
    """The engine's images now: ID → every name (tags and digests). One call: the SDK's
    images.list() inspects each image after listing them, which fails when another process
    removes one in between."""
    return {str(summary["Id"]): [*(summary.get("RepoTags") or []),
                                 *(summary.get("RepoDigests") or [])]
            for summary in client.api.images(all=True)}


def _remove_ours(client: Any) -> None:
    """Every image this process's tests made or pulled (named PREFIX…), and nothing else."""
    for image_id, names in held(client).items():
        if any(PREFIX in name for name in names):
            with contextlib.suppress(Exception):
                client.images.remove(image_id, force=True)


def tiny_image(client: Any) -> Any:
    """A new image of one small file with random content: an ID and a digest of its own."""
    data = f"nk-regtest {secrets.token_hex(16)}\n".encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo("hello.txt")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    name = f"{PREFIX}{secrets.token_hex(4)}"
    client.api.import_image_from_data(archive.getvalue(), repository=name, tag="v1")
    return client.images.get(f"{name}:v1")


def pushed(client: Any, where: Registry, name: str = "toolchain") -> tuple[Any, ImageReference]:
    """A tiny image pushed to the registry `where`: (the image, its pin)."""
    image = tiny_image(client)
    pin = push_image(client, image.tags[0], f"{where.address}/{PREFIX}{name}", "recipe0123456789",
                     Reporter(io.StringIO()))
    return image, pin


def pushed_then_logged_out(guarded: Registry, config: Path) -> ImageReference:
    """An image pushed to `guarded` by an engine logged in through `config` (DOCKER_CONFIG, as
    `docker login` writes it), forgotten by the engine, and the login removed: the pin."""
    assert guarded.login(config).returncode == 0
    keyed = _client()
    try:
        image, pin = pushed(keyed, guarded)
        forget(keyed, image)
    finally:
        keyed.close()
    (config / "config.json").unlink()
    return pin


def forget(client: Any, image: Any) -> None:
    """The engine drops the image (every name of it): the next use must pull."""
    client.images.remove(image.id, force=True)
    assert image.id not in set(held(client))


def pull(client: Any, pin: ImageReference) -> Any:
    return pull_pinned(client, pin, Reporter(io.StringIO()), WHAT)


def manifest_digest(where: Registry, pin: ImageReference) -> str:
    """The digest of the manifest bytes the registry itself stores: not the engine's word."""
    repository = pin.repository.split("/", 1)[1]
    body, _ = where.manifest(repository, pin.digest)
    return "sha256:" + hashlib.sha256(body).hexdigest()


def round_trip(client: Any, where: Registry) -> None:
    """Push, drop, pull by digest: the same image, its digest checked at every step."""
    image, pin = pushed(client, where)
    image.reload()
    assert pin.by_digest() in image.attrs["RepoDigests"]
    assert manifest_digest(where, pin) == pin.digest
    forget(client, image)
    back = pull(client, pin)
    assert back.id == image.id
    assert pin.by_digest() in back.attrs["RepoDigests"]


def one_line(error: BaseException, *names: str) -> str:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    for name in names:
        assert name in message, (name, message)
    return message


# -- the fixture itself ----------------------------------------------------------------------

def test_the_registry_speaks_what_it_was_started_with(registries: Callable[..., Registry]) -> None:
    """Plain HTTP answers /v2/ with 200; with auth, 401 and a Basic challenge without the
    credentials, 200 with them; with TLS, the certificate verifies for 127.0.0.1 and plain
    HTTP to the same port is refused."""
    plain, guarded = registries(), registries(tls=True, auth=True)
    assert plain.request("GET", "/v2/")[0] == 200
    anonymous = Registry(guarded.address, None, None, guarded.ca, guarded.storage, guarded.log)
    status, headers, _ = anonymous.request("GET", "/v2/")
    assert status == 401 and headers["www-authenticate"].startswith("Basic ")
    assert guarded.request("GET", "/v2/")[0] == 200
    cleartext = Registry(guarded.address, None, None, None, guarded.storage, guarded.log)
    # Go's TLS server answers plain HTTP "Client sent an HTTP request to an HTTPS server."
    assert cleartext.request("GET", "/v2/")[0] == 400


def test_a_stopped_registry_leaves_its_port_closed(tmp_path: Path) -> None:
    with registry(tmp_path / "r") as running:
        address = running.address
        assert running.request("GET", "/v2/")[0] == 200
    with pytest.raises(ConnectionRefusedError):
        running.request("GET", "/v2/")
    assert address == running.address


def test_a_registry_whose_port_was_taken_starts_on_another(
        registries: Callable[..., Registry], monkeypatch: pytest.MonkeyPatch) -> None:
    """free_port's port taken before the registry binds it (another test's registry, which
    answers /v2/ too): the new one is not fooled by that answer, and starts on another port."""
    first = registries()
    ports = iter([int(first.address.rsplit(":", 1)[1]), registry_server.free_port()])
    monkeypatch.setattr(registry_server, "free_port", lambda: next(ports))
    second = registries()
    assert second.address != first.address
    assert next(ports, None) is None  # both ports were tried
    assert second.request("GET", "/v2/")[0] == 200

def test_docker_login_refuses_a_wrong_password_and_keeps_a_right_one(
        registries: Callable[..., Registry], tmp_path: Path) -> None:
    guarded = registries(tls=True, auth=True)
    wrong = guarded.login(tmp_path / "wrong", password="not-the-password")
    assert wrong.returncode == 1 and "401 Unauthorized" in wrong.stderr
    right = guarded.login(tmp_path / "right")
    assert right.returncode == 0, right.stderr
    auths = json.loads((tmp_path / "right" / "config.json").read_text())["auths"]
    assert base64.b64decode(auths[guarded.address]["auth"]).decode() == \
        f"{guarded.user}:{guarded.password}"


# -- push and pull by digest -----------------------------------------------------------------

def test_push_then_pull_by_digest(client: Any, registries: Callable[..., Registry]) -> None:
    round_trip(client, registries())


def test_push_then_pull_by_digest_over_tls(client: Any,
                                           registries: Callable[..., Registry]) -> None:
    """TLS only (the port refuses plain HTTP); the engine skips verifying the self-signed
    certificate because 127.0.0.0/8 is an insecure registry to it (docs in registry_server)."""
    round_trip(client, registries(tls=True))


def test_push_then_pull_with_docker_login_over_tls(
        registries: Callable[..., Registry], no_login: Path) -> None:
    """Basic auth and TLS: refused before `docker login`, a round trip after it."""
    guarded = registries(tls=True, auth=True)
    anonymous = _client()
    try:
        image = tiny_image(anonymous)
        with pytest.raises(RegistryRefused) as refused:
            push_image(anonymous, image.tags[0], f"{guarded.address}/{PREFIX}toolchain", "t",
                       Reporter(io.StringIO()))
        one_line(refused.value, guarded.address, "docker login")
        anonymous.images.remove(image.id, force=True)
    finally:
        anonymous.close()
    assert guarded.login(no_login).returncode == 0
    logged_in = _client()
    try:
        round_trip(logged_in, guarded)
    finally:
        _remove_ours(logged_in)
        logged_in.close()


# -- what goes wrong, through the API ---------------------------------------------------------

def test_a_registry_that_is_down(client: Any, tmp_path: Path) -> None:
    with registry(tmp_path / "r") as running:
        image, pin = pushed(client, running)
    forget(client, image)
    with pytest.raises(RegistryUnreachable) as down:
        pull(client, pin)
    one_line(down.value, running.address, pin.text())
    again = tiny_image(client)
    with pytest.raises(RegistryUnreachable) as down:
        push_image(client, again.tags[0], pin.repository, "t", Reporter(io.StringIO()))
    one_line(down.value, running.address)


def test_no_credentials_and_wrong_credentials_are_refused(
        client: Any, registries: Callable[..., Registry], no_login: Path) -> None:
    """No login: refused. A login whose password has since changed (the config file as
    `docker login` wrote it, the password in it replaced): refused, the password not shown."""
    guarded = registries(auth=True)
    pin = pushed_then_logged_out(guarded, no_login)
    with pytest.raises(RegistryRefused) as refused:
        pull(client, pin)
    one_line(refused.value, guarded.address, pin.text())
    stale = base64.b64encode(f"{guarded.user}:stale-password".encode()).decode()
    (no_login / "config.json").write_text(json.dumps({"auths": {guarded.address: {"auth": stale}}}))
    stale_client = _client()
    try:
        with pytest.raises(RegistryRefused) as refused:
            pull(stale_client, pin)
    finally:
        stale_client.close()
    message = one_line(refused.value, guarded.address, pin.text())
    assert "stale-password" not in message and stale not in message


def test_a_pin_the_registry_does_not_have(client: Any,
                                          registries: Callable[..., Registry]) -> None:
    """A real digest (pushed to another registry) that this registry never received."""
    first, second = registries(), registries()
    image, pin = pushed(client, first)
    forget(client, image)
    elsewhere = ImageReference(pin.repository.replace(first.address, second.address), pin.tag,
                               pin.digest)
    with pytest.raises(PinNotFound) as absent:
        pull(client, elsewhere)
    one_line(absent.value, second.address, elsewhere.text())
    assert image.id not in set(held(client))


def test_a_registry_that_serves_another_manifest(client: Any,
                                                 registries: Callable[..., Registry]) -> None:
    """The proxy answers the pinned digest with another image's manifest: refused as a digest
    mismatch, and neither image is on the engine afterwards. Through the same proxy the other
    image's own digest pulls fine: only the lie fails."""
    upstream = registries()
    pinned_image, pin = pushed(client, upstream, "pinned")
    other_image, other = pushed(client, upstream, "pinned")
    forget(client, pinned_image)
    forget(client, other_image)
    repository = pin.repository.split("/", 1)[1]
    with tampering(upstream, repository, digest=pin.digest, other=other.digest) as proxy:
        lied = ImageReference(f"{proxy.address}/{repository}", pin.tag, pin.digest)
        with pytest.raises(DigestMismatch) as mismatch:
            pull(client, lied)
        assert proxy.served_instead
        present = set(held(client))
        assert pinned_image.id not in present and other_image.id not in present
        honest = ImageReference(lied.repository, other.tag, other.digest)
        assert pull(client, honest).id == other_image.id
    one_line(mismatch.value, proxy.address, lied.text())



def test_a_registry_that_serves_a_corrupt_layer(client: Any,
                                                registries: Callable[..., Registry]) -> None:
    """The manifest is the pinned one, its layer's bytes are not: refused as a digest
    mismatch, and the image is not on the engine afterwards."""
    upstream = registries()
    image, pin = pushed(client, upstream)
    forget(client, image)
    repository = pin.repository.split("/", 1)[1]
    layer = json.loads(upstream.manifest(repository, pin.digest)[0])["layers"][0]["digest"]
    with tampering(upstream, repository, corrupt_layer=layer) as proxy:
        corrupt = ImageReference(f"{proxy.address}/{repository}", pin.tag, pin.digest)
        with pytest.raises(DigestMismatch) as mismatch:
            pull(client, corrupt)
        assert proxy.served_instead
    one_line(mismatch.value, proxy.address, corrupt.text())
    assert image.id not in set(held(client))

# -- what goes wrong, through `ninfer-kits build --builder docker` ---------------------------

MATRIX = """\
schema = 1

[upstreams.eng]
repository = "owner/eng"
url = "https://example.com/owner/eng.git"
branch = "main"
revision = "0123456789ab"
version_file = "VERSION"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE"]
cmake_options = {{ CMAKE_BUILD_TYPE = "Release" }}
targets = {{ "eng" = "apps/eng" }}

[toolchains.{toolchain}]
dockerfile = "dockerfiles/toolchain-cuda-ubuntu.Dockerfile"
base_image = "nvidia/cuda:13.1.2-devel-ubuntu24.04"
cuda = "13.1.2"
runtime_dockerfile = "dockerfiles/runtime-ubuntu.Dockerfile"
runtime_base_image = "nvidia/cuda:13.1.2-runtime-ubuntu24.04"
image = "{pin}"
runtime_image = "{pin}"

[kits.{toolchain}]
upstream = "eng"
arch = "sm_86"
toolchain = "{toolchain}"
card = "RTX 3090"
tag = "eng-v{{version}}-linux-{{arch_id}}-{{rev8}}"
asset = "eng-kit-{{rev12}}-{{arch_id}}.tar.gz"
"""


def build_pinned(client: Any, tmp_path: Path, pin: ImageReference,
                 ) -> subprocess.CompletedProcess[str]:
    """`ninfer-kits build KIT --builder docker` on a matrix whose toolchain (and kit)
    `nk-regtest-<hex>` pins `pin`; asserts that it built nothing: no toolchain or runtime image
    of the toolchain, no image under the pin's repository, no container left."""
    matrix = tmp_path / "matrix.toml"
    toolchain = f"{PREFIX}{secrets.token_hex(3)}"
    matrix.write_text(MATRIX.format(pin=pin.text(), toolchain=toolchain))
    before = set(held(client))
    done = subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "build", toolchain, "--builder", "docker",
         "--matrix", str(matrix), "--dist", str(tmp_path / "dist"),
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, cwd=tmp_path, timeout=120)
    for image_id, names in held(client).items():
        if image_id not in before:
            assert not [name for name in names if toolchain in name or pin.repository in name]
    assert not client.containers.list(all=True, filters={"ancestor": pin.by_digest()})
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())
    return done


def one_error(done: subprocess.CompletedProcess[str], status: int, *names: str) -> str:
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ninfer-kits: error:")]
    assert len(errors) == 1, done.stderr
    for name in names:
        assert name in errors[0], (name, errors[0])
    return errors[0]


def test_build_with_a_pin_on_a_registry_that_is_down(client: Any, tmp_path: Path) -> None:
    with registry(tmp_path / "r") as running:
        image, pin = pushed(client, running)
    forget(client, image)
    done = build_pinned(client, tmp_path, pin)
    one_error(done, EXIT_ENVIRONMENT, running.address, pin.text(), "did not answer")


def test_build_with_a_pin_the_registry_refuses(client: Any, tmp_path: Path,
                                               registries: Callable[..., Registry],
                                               no_login: Path) -> None:
    guarded = registries(tls=True, auth=True)
    pin = pushed_then_logged_out(guarded, no_login)
    done = build_pinned(client, tmp_path, pin)
    one_error(done, EXIT_ENVIRONMENT, guarded.address, pin.text(), "docker login")
    stale = base64.b64encode(f"{guarded.user}:stale-password".encode()).decode()
    (no_login / "config.json").write_text(json.dumps({"auths": {guarded.address: {"auth": stale}}}))
    done = build_pinned(client, tmp_path, pin)
    one_error(done, EXIT_ENVIRONMENT, guarded.address, pin.text(), "docker login")
    assert "stale-password" not in done.stderr and stale not in done.stderr


def test_build_with_a_pin_the_registry_does_not_have(client: Any, tmp_path: Path,
                                                     registries: Callable[..., Registry]) -> None:
    first, second = registries(), registries()
    image, pin = pushed(client, first)
    forget(client, image)
    elsewhere = ImageReference(pin.repository.replace(first.address, second.address), pin.tag,
                               pin.digest)
    done = build_pinned(client, tmp_path, elsewhere)
    one_error(done, EXIT_ENVIRONMENT, second.address, elsewhere.text())


def test_build_with_a_pin_a_registry_serves_tampered(client: Any, tmp_path: Path,
                                                     registries: Callable[..., Registry]) -> None:
    upstream = registries()
    pinned_image, pin = pushed(client, upstream, "pinned")
    other_image, other = pushed(client, upstream, "pinned")
    forget(client, pinned_image)
    forget(client, other_image)
    repository = pin.repository.split("/", 1)[1]
    with tampering(upstream, repository, digest=pin.digest, other=other.digest) as proxy:
        lied = ImageReference(f"{proxy.address}/{repository}", pin.tag, pin.digest)
        done = build_pinned(client, tmp_path, lied)
        assert proxy.served_instead
    one_error(done, EXIT_CHECK_FAILED, proxy.address, lied.text(), "nothing is built")
    present = set(held(client))
    assert pinned_image.id not in present and other_image.id not in present



# -- toolchain push, then a build that pulls what it pinned -----------------------------------

TINY_DOCKERFILE = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nLABEL org.example.regtest=1\n"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *args], capture_output=True,
                          text=True, check=False, cwd=cwd, timeout=120)


def _tiny_toolchain_matrix(client: Any, folder: Path) -> tuple[Path, str]:
    """A matrix whose toolchain (and kit) `nk-regtest-<hex>` is a tiny base plus a LABEL, its
    upstream on a closed port (a build stops at the fetch, after the preflight's pulls)."""
    base = tiny_image(client)
    toolchain = f"{PREFIX}{secrets.token_hex(3)}"
    (folder / "tiny.Dockerfile").write_text(TINY_DOCKERFILE)
    text = MATRIX.format(pin="unused", toolchain=toolchain)
    text = text.replace("https://example.com", "http://127.0.0.1:1").replace('"dockerfiles/toolchain-cuda-ubuntu.Docke'
                                                      'rfile"', '"tiny.Dockerfile"')
    text = text.replace('"dockerfiles/runtime-ubuntu.Dockerfile"', '"tiny.Dockerfile"')
    text = text.replace('"nvidia/cuda:13.1.2-devel-ubuntu24.04"', f'"{base.tags[0]}"')
    text = text.replace('"nvidia/cuda:13.1.2-runtime-ubuntu24.04"', f'"{base.tags[0]}"')
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("image =", "runtime_image ="))) + "\n"
    matrix = folder / "matrix.toml"
    matrix.write_text(text)
    return matrix, toolchain


def test_toolchain_push_pins_and_a_build_pulls_exactly_the_pin(
        client: Any, registries: Callable[..., Registry], tmp_path: Path) -> None:
    """`toolchain push --write` pushes the base and both images and pins them; with the engine
    emptied of them, `build` pulls the pinned toolchain image (the pushed image's ID) and builds
    none; `--toolchain-image` overrides the pin. An edit of the Dockerfile makes both stale."""
    where = registries()
    matrix, toolchain = _tiny_toolchain_matrix(client, tmp_path)
    pushed_ = _cli("toolchain", "push", toolchain, "--matrix", str(matrix), "--to",
                   f"{where.address}/ns", "--write", cwd=tmp_path)
    assert pushed_.returncode == 0, pushed_.stderr
    pins = load_matrix(matrix).toolchain(toolchain)
    assert f"[toolchains.{toolchain}]" in pushed_.stdout and pins.image in pushed_.stdout
    pin = parse_pin(pins.image)
    assert manifest_digest(where, pin) == pin.digest
    made = client.images.get(pin.by_digest()).id
    stale = _cli("toolchain", "stale", "--matrix", str(matrix), "--json", cwd=tmp_path)
    assert json.loads(stale.stdout) == {"schema_version": 1, "stale": []}

    _remove_ours(client)
    done = _cli("build", toolchain, "--builder", "docker", "--matrix", str(matrix),
                "--dist", str(tmp_path / "dist"), "--cache-dir", str(tmp_path / "cache"),
                cwd=tmp_path)
    one_error(done, EXIT_ENVIRONMENT, "cannot fetch")  # after the preflight: the upstream
    assert "✓ preflight" in done.stderr and "building" not in done.stderr
    assert client.images.get(pin.by_digest()).id == made
    assert not [name for names in held(client).values() for name in names
                if name.startswith(f"ninfer-kits/toolchain-{toolchain}:")]

    missing = registries()
    elsewhere = pin.text().replace(where.address, missing.address)
    done = _cli("build", toolchain, "--builder", "docker", "--matrix", str(matrix),
                "--dist", str(tmp_path / "dist"), "--cache-dir", str(tmp_path / "cache"),
                "--toolchain-image", elsewhere, cwd=tmp_path)
    one_error(done, EXIT_ENVIRONMENT, missing.address, "has no such image")

    (tmp_path / "tiny.Dockerfile").write_text(TINY_DOCKERFILE + "LABEL org.example.edit=2\n")
    stale = _cli("toolchain", "stale", "--matrix", str(matrix), "--json", cwd=tmp_path)
    assert [(item["toolchain"], item["key"]) for item in json.loads(stale.stdout)["stale"]] == \
        [(toolchain, "image"), (toolchain, "runtime_image")]


def test_toolchain_push_to_a_registry_that_is_down_or_refuses(
        client: Any, registries: Callable[..., Registry], tmp_path: Path) -> None:
    """One line and exit 3 each, before any image is built: the bases go first."""
    matrix, toolchain = _tiny_toolchain_matrix(client, tmp_path)
    with registry(tmp_path / "stopped") as stopped:
        pass
    guarded = registries(tls=True, auth=True)
    for prefix, said in ((f"{stopped.address}/ns", "did not answer"),
                         (f"{guarded.address}/ns", f"docker login {guarded.address}")):
        done = _cli("toolchain", "push", toolchain, "--matrix", str(matrix), "--to", prefix,
                    cwd=tmp_path)
        one_error(done, EXIT_ENVIRONMENT, prefix, said)
        assert done.stdout == "" and "building" not in done.stderr
    assert "@sha256:" not in matrix.read_text()
