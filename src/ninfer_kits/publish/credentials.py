"""B2 credentials for publish: an application key from B2_APPLICATION_KEY_ID and
B2_APPLICATION_KEY, else from an env file of `KEY=VALUE` lines named by --b2-env or
NINFER_B2_ENV (the seed's rented-box scripts kept it so).

The key is held in remote.py's Secret (never shown, registered with the redactor), as the
GitHub token is; remote.py reads that token.

The signing key of a matrix with [publish.signing]: the OpenSSH private key's text in
NINFER_KITS_SIGNING_KEY (a CI secret), else a file named by NINFER_KITS_SIGNING_KEY_FILE. The
text is a Secret too, and so is each of its lines, so that no piece of it shows in a message.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.remote import MissingCredentials, Secret, register

B2_KEY_ID = "B2_APPLICATION_KEY_ID"
B2_KEY = "B2_APPLICATION_KEY"
B2_ENV_FILE = "NINFER_B2_ENV"
SIGNING_KEY = "NINFER_KITS_SIGNING_KEY"
SIGNING_KEY_FILE = "NINFER_KITS_SIGNING_KEY_FILE"

_ENV_LINE = re.compile(r"(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)")


def b2_key(environ: Mapping[str, str], env_file: Path | None = None) -> tuple[str, Secret]:
    """(key id, key): from the file given as --b2-env; else the environment's two variables;
    else the file $NINFER_B2_ENV names. MissingCredentials names what is missing."""
    if env_file is None:
        key_id, key = environ.get(B2_KEY_ID, "").strip(), environ.get(B2_KEY, "").strip()
        if key_id and key:
            return key_id, Secret(key, B2_KEY)
        named = environ.get(B2_ENV_FILE, "").strip()
        if not named:
            missing = [name for name, value in ((B2_KEY_ID, key_id), (B2_KEY, key)) if not value]
            raise MissingCredentials(
                f"B2: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set "
                f"(set {B2_KEY_ID} and {B2_KEY}, or name an env file holding them with "
                f"{B2_ENV_FILE} or --b2-env)")
        env_file = Path(named)
    values = read_env_file(env_file)
    missing = [name for name in (B2_KEY_ID, B2_KEY) if not values.get(name)]
    if missing:
        raise MissingCredentials(f"B2: the env file {env_file} does not set "
                                 f"{' or '.join(missing)}")
    return values[B2_KEY_ID], Secret(values[B2_KEY], str(env_file))


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (`export KEY=VALUE`, quotes and # comments allowed). Errors name the
    line, never its text: the text is a secret."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingCredentials(f"B2: the env file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise MissingCredentials(f"B2: cannot read the env file {path}: {reason}") from None
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ENV_LINE.fullmatch(line)
        if match is None:
            raise BadInput(f"B2: the env file {path}, line {number}: not a KEY=VALUE line")
        value = match["value"].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[match["key"]] = value
        if match["key"] == B2_KEY:
            register(value)
    return values


@dataclass(frozen=True)
class SigningKey:
    """The private key publish signs SHA256SUMS with: its text (a Secret) or its file."""

    text: Secret | None = None
    file: Path | None = None

    @property
    def source(self) -> str:
        return SIGNING_KEY if self.text is not None else f"{SIGNING_KEY_FILE} ({self.file})"

    @contextmanager
    def as_file(self) -> Iterator[Path]:
        """A path ssh-keygen can read the key from: the file named, or the text written to a
        private (0600) file in a private folder, removed when the block ends."""
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
    """The signing key from NINFER_KITS_SIGNING_KEY (its text), else the file
    NINFER_KITS_SIGNING_KEY_FILE names; MissingCredentials naming both when neither is set."""
    text = environ.get(SIGNING_KEY, "")
    if text.strip():
        for line in text.splitlines():  # a line of it in a message is hidden too
            if not line.strip().startswith("-----"):  # not the armor, which is no secret
                register(line.strip())
        return SigningKey(text=Secret(text, SIGNING_KEY))
    named = environ.get(SIGNING_KEY_FILE, "").strip()
    if not named:
        raise MissingCredentials(
            f"signing: matrix.toml's [publish.signing] says releases are signed, and neither "
            f"{SIGNING_KEY} (the private key's text) nor {SIGNING_KEY_FILE} (its file) is set")
    path = Path(named)
    if not path.is_file():
        raise MissingCredentials(f"signing: {SIGNING_KEY_FILE} names {path}, which is not a "
                                 f"file")
    return SigningKey(file=path)
