"""B2 credentials for publish: an application key from B2_APPLICATION_KEY_ID and
B2_APPLICATION_KEY, else from an env file of `KEY=VALUE` lines named by --b2-env or
NINFER_B2_ENV (the seed's rented-box scripts kept it so).

The key is held in remote.py's Secret (never shown, registered with the redactor), as the
GitHub token is; remote.py reads that token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.remote import MissingCredentials, Secret, register

B2_KEY_ID = "B2_APPLICATION_KEY_ID"
B2_KEY = "B2_APPLICATION_KEY"
B2_ENV_FILE = "NINFER_B2_ENV"

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
