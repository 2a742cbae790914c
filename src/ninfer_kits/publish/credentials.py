"""The signing key of a matrix with [publish.signing], from NINFER_KITS_SIGNING_KEY (its text)
or NINFER_KITS_SIGNING_KEY_FILE. The text and each of its lines are Secrets, so that no piece
of it shows in a message."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config import settings
from ninfer_kits.net.remote import MissingCredentials, Secret, register

SIGNING_KEY = settings.SIGNING_KEY.name
SIGNING_KEY_FILE = settings.SIGNING_KEY_FILE.name


@dataclass(frozen=True)
class SigningKey:
    """The key publish signs SHA256SUMS with: its text (a Secret) or its file."""

    text: Secret | None = None
    file: Path | None = None

    @property
    def source(self) -> str:
        return SIGNING_KEY if self.text is not None else f"{SIGNING_KEY_FILE} ({self.file})"

    @contextmanager
    def as_file(self) -> Iterator[Path]:
        """A path ssh-keygen reads: the file, or the text in a private 0600 file for the block."""
        if self.text is None:
            assert self.file is not None
            yield self.file
            return
        with tempfile.TemporaryDirectory(prefix="ninfer-kits-key-") as folder:
            path = Path(folder) / "signing-key"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                # a CI secret loses its final newline; ssh-keygen wants the PEM-like lines
                handle.write(self.text.value.strip().replace("\r\n", "\n") + "\n")
            yield path


def signing_key(environ: Mapping[str, str]) -> SigningKey:
    """The signing key; MissingCredentials naming both variables when neither is set."""
    text = settings.read(settings.SIGNING_KEY, environ) or ""
    if text.strip():
        for line in text.splitlines():  # a line of it in a message is hidden too
            if not line.strip().startswith("-----"):  # not the armor, which is no secret
                register(line.strip())
        return SigningKey(text=Secret(text, SIGNING_KEY))
    named = (settings.read(settings.SIGNING_KEY_FILE, environ) or "").strip()
    if not named:
        raise MissingCredentials(
            f"signing: matrix.toml's [publish.signing] says releases are signed, and neither "
            f"{SIGNING_KEY} (the private key's text) nor {SIGNING_KEY_FILE} (its file) is set")
    path = Path(named)
    if not path.is_file():
        raise MissingCredentials(f"signing: {SIGNING_KEY_FILE} names {path}, which is not a "
                                 f"file")
    return SigningKey(file=path)
