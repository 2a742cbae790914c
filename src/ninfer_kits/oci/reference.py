"""Image references as OCI registries and the Docker engine spell them, checked against the
distribution project's grammar (docker/reference) and bounds, so that a name is read as the engine
reads it or refused with the reason. A *pin* carries the manifest's sha256, which the engine
checks every pulled byte against; its tag is informational (docs/toolchain.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_NAME: Final = 255  # the distribution project's bound on a repository name
_COMPONENT: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN: Final = (r"(?:localhost|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                  r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])"
                  r"(?::[0-9]{1,5})?")
_PATH: Final = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
TAG: Final = re.compile(r"[\w][\w.-]{0,127}")
DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
DEFAULT_REGISTRY: Final = "docker.io"


@dataclass(frozen=True)
class ImageReference:
    repository: str  # the registry host included, when it has one
    tag: str = ""
    digest: str = ""

    @property
    def registry(self) -> str:
        """The first component when the engine takes it for a host, else Docker Hub."""
        first, slash, _ = self.repository.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            return first
        return DEFAULT_REGISTRY

    def text(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + \
            (f"@{self.digest}" if self.digest else "")

    def by_digest(self) -> str:
        """How the engine lists a pulled or pushed image (RepoDigests)."""
        return f"{self.repository}@{self.digest}"

    def __str__(self) -> str:
        return self.text()


def parse_reference(text: str) -> ImageReference:
    if not text or len(text) > MAX_NAME + 128 + 80 or not text.isprintable() or \
            any(char.isspace() for char in text):
        raise ValueError("not an image reference (empty, too long, or with spaces or control "
                         "characters)")
    rest, _, digest = text.partition("@")
    if digest and DIGEST.fullmatch(digest) is None:
        raise ValueError(f"its digest {digest[:80]!r} is not sha256:<64 lowercase hex digits>")
    repository, tag = _split_tag(rest)
    if tag and TAG.fullmatch(tag) is None:
        raise ValueError(f"its tag {tag[:80]!r} is not a tag (letters, digits, _ . -, at most "
                         f"128, not starting with . or -)")
    _check_repository(repository)
    return ImageReference(repository, tag, digest)


def parse_pin(text: str) -> ImageReference:
    reference = parse_reference(text)
    if not reference.digest:
        raise ValueError("it names no digest: a pin is NAME[:TAG]@sha256:<64 hex digits> "
                         "(`ninfer-kits toolchain push` prints one)")
    return reference


def _split_tag(text: str) -> tuple[str, str]:
    """A colon after the last slash starts the tag (one before it is the registry's port)."""
    slash = text.rfind("/")
    colon = text.rfind(":")
    return (text[:colon], text[colon + 1:]) if colon > slash else (text, "")


def _check_repository(repository: str) -> None:
    if len(repository) > MAX_NAME:
        raise ValueError(f"its name is longer than {MAX_NAME} characters")
    first, slash, rest = repository.partition("/")
    hosted = slash and ("." in first or ":" in first or first == "localhost")
    if hosted and re.fullmatch(_DOMAIN, first) is None:
        raise ValueError(f"its registry {first[:80]!r} is not a host[:port]")
    path = rest if hosted else repository
    if _PATH.fullmatch(path) is None:
        raise ValueError(f"its name {path[:80]!r} is not a repository name (lowercase "
                         f"letters, digits and . _ - between them, components joined by /)")


def check_prefix(prefix: str) -> None:
    """A registry prefix (`[registry] prefix`, `toolchain push --to`); ValueError when it names
    no registry host (pins would name Docker Hub by accident)."""
    reference = parse_reference(f"{prefix}/ninfer-kits-toolchain-x")
    if reference.registry == DEFAULT_REGISTRY and not prefix.startswith(DEFAULT_REGISTRY):
        raise ValueError("it names no registry host (such as ghcr.io/OWNER or "
                         "127.0.0.1:5000/ns)")
