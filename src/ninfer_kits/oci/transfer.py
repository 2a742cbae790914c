"""Images to and from an OCI registry through the Docker engine, by digest. The engine moves and
checks the bytes; this module is the contract around it: a pinned image is used only under its
digest, pulled when absent, never built; a push returns the registry's digest. Credentials are
docker's own, so no token passes through ninfer-kits (docs/toolchain.md)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from typing import Any, Final

from ninfer_kits.config.tables import printable
from ninfer_kits.errors import CheckFailed, EnvironmentFailure
from ninfer_kits.host.engine import engine_address
from ninfer_kits.log import Reporter
from ninfer_kits.oci.reference import DIGEST, ImageReference

ANSWER_SHOWN: Final = 300  # characters of a registry's (or the engine's) error kept in a message

# How the engine words a registry's failure, lowercased; the first class that matches decides.
_MISMATCH: Final = ("manifest verification failed", "digest did not match", "digest mismatch",
                    "failed to verify", "verification failed")
_REFUSED: Final = ("unauthorized", "authentication required", "no basic auth credentials",
                   "denied", "incorrect username or password", "forbidden")
_NOT_FOUND: Final = ("manifest unknown", "not found", "does not exist", "name unknown")
_UNREACHABLE: Final = ("connection refused", "no such host", "i/o timeout", "timeout",
                       "connection reset", "eof", "tls", "certificate", "x509",
                       "server gave http response", "network is unreachable", "dial tcp")


class RegistryUnreachable(EnvironmentFailure):
    """The registry did not answer."""


class RegistryRefused(EnvironmentFailure):
    """The registry refused the engine's credentials."""


class PinNotFound(EnvironmentFailure):
    """The registry answers and has no image under the pinned digest."""


class DigestMismatch(CheckFailed):
    """What the registry served is not the image the pin names: nothing is built from it."""


_FAILURES: Final[tuple[tuple[tuple[str, ...], type[Exception], str], ...]] = (
    (_MISMATCH, DigestMismatch, "what {where} served is not the pinned image ({said}); nothing "
                                "is built from it"),
    (_REFUSED, RegistryRefused, "{where} refused the credentials ({said}); log the engine in "
                                "with `{login}` (a token with packages: {scope} for GHCR)"),
    (_NOT_FOUND, PinNotFound, "{where} has no such image ({said}); was it deleted? "
                              "`ninfer-kits toolchain push` makes a new pin"),
    (_UNREACHABLE, RegistryUnreachable, "{where} did not answer ({said}); is it up and "
                                        "reachable from the engine at {engine}?"),
)


def pull_pinned(client: Any, pin: ImageReference, reporter: Reporter, what: str) -> Any:
    import docker.errors

    try:
        image = client.images.get(pin.by_digest())
    except docker.errors.ImageNotFound:
        image = None
    if image is None:
        reporter.info(f"pulling the {what} {pin.by_digest()} from {pin.registry}")
        progress = reporter.progress(f"pulling {pin.repository}")
        try:
            list(_follow(client.api.pull(pin.repository, tag=pin.digest, stream=True,
                                         decode=True), progress.update))
        except docker.errors.APIError as error:
            raise registry_failure("pull", pin, _said(error)) from None
        try:
            image = client.images.get(pin.by_digest())
        except docker.errors.ImageNotFound:
            raise DigestMismatch(f"the {what} {pin.text()}: the engine at {engine_address()} "
                                 f"pulled it but holds no image under that digest; nothing is "
                                 f"built from it") from None
    _check_digest(image, pin, what)
    return image


def push_image(client: Any, local: str, repository: str, tag: str, reporter: Reporter) -> \
        ImageReference:
    """The pushed reference, with the digest the registry computed."""
    import docker.errors

    target = ImageReference(repository, tag)
    client.images.get(local).tag(repository, tag=tag)
    reporter.info(f"pushing {local} as {target.text()}")
    progress = reporter.progress(f"pushing {repository}")
    try:
        answers = list(_follow(client.api.push(repository, tag=tag, stream=True, decode=True),
                               progress.update))
    except docker.errors.APIError as error:
        with suppress(docker.errors.APIError):  # the name was ours for this push only
            client.images.remove(target.text(), noprune=True)
        raise registry_failure("push", target, _said(error)) from None
    digest = next((str(aux.get("Digest", "")) for aux in answers), "")
    if DIGEST.fullmatch(digest) is None:
        raise registry_failure("push", target, f"no digest in the engine's answer "
                                               f"({printable(digest[:80])!r})")
    return ImageReference(repository, tag, digest)


def registry_failure(action: str, reference: ImageReference, answer: str) -> Exception:
    said = printable(answer.strip().splitlines()[0] if answer.strip() else "no answer")
    said = said[:ANSWER_SHOWN]
    where = f"registry {reference.registry}"
    facts = {"where": where, "said": said, "login": f"docker login {reference.registry}",
             "scope": "write" if action == "push" else "read", "engine": engine_address()}
    lowered = said.lower()
    for words, kind, message in _FAILURES:
        if any(word in lowered for word in words):
            return kind(f"{action} of {reference.text()}: " + message.format(**facts))
    return EnvironmentFailure(f"{action} of {reference.text()} through {where} failed: {said}")


def _follow(stream: Iterable[Mapping[str, Any]], update: Any) -> Iterator[Mapping[str, Any]]:
    """The engine's progress stream: layers as progress, `error` raised as APIError, `aux`
    handed on."""
    import docker.errors

    done: set[str] = set()
    for entry in stream:
        if "error" in entry:
            raise docker.errors.APIError(str(entry.get("error", "")))
        if "aux" in entry and isinstance(entry["aux"], Mapping):
            yield entry["aux"]
        status, layer = str(entry.get("status", "")), str(entry.get("id", ""))
        if status in ("Pull complete", "Pushed", "Layer already exists", "Already exists"):
            done.add(layer)
            update(len(done), None, f"{status}: {printable(layer[:20])}", milestone=False)


def _said(error: Exception) -> str:
    explanation = getattr(error, "explanation", None)
    return str(explanation or error)


def _check_digest(image: Any, pin: ImageReference, what: str) -> None:
    """The image must be listed under the pinned digest: the engine's own record of what it
    pulled (or pushed) under that name."""
    held = [str(item) for item in (image.attrs.get("RepoDigests") or [])]
    if pin.by_digest() not in held:
        raise DigestMismatch(f"the {what} {pin.text()}: the engine's image {image.id} is listed "
                             f"under {', '.join(held) or 'no digest'}, not the pinned one; "
                             f"nothing is built from it")
