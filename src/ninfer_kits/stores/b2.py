"""The `b2` store: a Backblaze B2 bucket, `<prefix><tag>/<asset>`, published to first (blob
storage before the GitHub release). Its table, key and fetch's side are here; its client is
publish/stores/b2.py (docs/publish.md). The key is a Secret, never shown."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ninfer_kits.config import settings
from ninfer_kits.config.tables import Table, quote
from ninfer_kits.errors import BadInput
from ninfer_kits.net.remote import MissingCredentials, Secret, register
from ninfer_kits.stores import Origin, StoreKind, StoreSetup

if TYPE_CHECKING:
    from ninfer_kits.fetch.http import Client
    from ninfer_kits.fetch.locate import Context, Located, Wanted
    from ninfer_kits.matrix import Matrix
    from ninfer_kits.publish.store import Store

B2_KEY_ID = settings.B2_KEY_ID.name
B2_KEY = settings.B2_KEY.name
B2_ENV_FILE = settings.B2_ENV_FILE.name

_BUCKET = re.compile(r"[A-Za-z0-9-]{6,63}")
_NAME_BYTES: Final = 1024  # B2's limit on a file name, in UTF-8 bytes
_ENV_LINE = re.compile(r"(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)")


@dataclass(frozen=True, kw_only=True)
class B2Target:
    """[publish.b2]: the bucket and the key prefix `<tag>/<asset>` go under."""

    bucket: str
    prefix: str = ""  # empty, or ends with '/'


def read_table(table: Table) -> B2Target:
    table.check_keys(("bucket",), ("prefix",))
    bucket = table.text("bucket")
    if _BUCKET.fullmatch(bucket) is None or bucket.lower().startswith("b2-"):
        raise table.error("bucket", f"invalid B2 bucket name {quote(bucket)} (6 to 63 letters, "
                                    f"digits and '-', not starting with 'b2-')")
    prefix = table.data.get("prefix", "")
    if not isinstance(prefix, str):
        raise table.error("prefix", f"expected a string, got {type(prefix).__name__}")
    problem = prefix_problem(prefix)
    if problem:
        raise table.error("prefix", f"invalid key prefix {quote(prefix)}: {problem}")
    return B2Target(bucket=bucket, prefix=prefix)


def prefix_problem(prefix: str) -> str | None:
    """Why `prefix` cannot start the B2 file names `<prefix><tag>/<asset>`, or None."""
    if not prefix:
        return None
    if any(not c.isprintable() or c == "\\" for c in prefix):
        return "contains a control character or a backslash"
    if prefix.startswith("/"):
        return f"must not start with '/'; did you mean {quote(prefix.lstrip('/'))}?"
    if not prefix.endswith("/"):
        return f"must end with '/' (a folder of the bucket); did you mean {quote(prefix + '/')}?"
    if any(part in ("", ".", "..") for part in prefix[:-1].split("/")):
        return "must not contain an empty, '.' or '..' segment"
    if len(prefix.encode("utf-8")) > _NAME_BYTES // 2:
        return f"longer than {_NAME_BYTES // 2} bytes (B2 file names hold {_NAME_BYTES})"
    return None


def target_of(matrix: Matrix | None) -> B2Target | None:
    found = matrix.publish.targets.get("b2") if matrix is not None else None
    return found if isinstance(found, B2Target) else None


def b2_key(environ: Mapping[str, str], env_file: Path | None = None) -> tuple[str, Secret]:
    """(key id, key): the --b2-env file, else B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY,
    else the file $NINFER_B2_ENV names. MissingCredentials names what is missing."""
    if env_file is None:
        key_id = (settings.read(settings.B2_KEY_ID, environ) or "").strip()
        key = (settings.read(settings.B2_KEY, environ) or "").strip()
        if key_id and key:
            return key_id, Secret(key, B2_KEY)
        named = (settings.read(settings.B2_ENV_FILE, environ) or "").strip()
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
    """`KEY=VALUE` lines (`export`, quotes and # comments allowed); errors name the line, never
    its text, a secret."""
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


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b2-env", type=Path, metavar="FILE", default=None,
                        help=f"an env file with {B2_KEY_ID} and {B2_KEY} "
                             f"(default: those variables, else ${B2_ENV_FILE})")


def _make(setup: StoreSetup) -> Store:
    target = target_of(setup.matrix)
    if target is None:
        raise BadInput(f"{setup.matrix.path}: no [publish.b2] table: add one with bucket = "
                       f"\"NAME\" and prefix = \"kits/\" to publish to B2")
    key_id, key = b2_key(setup.environ, setup.args.b2_env)
    from ninfer_kits.publish.stores.b2 import B2Store

    return B2Store(target, key_id, key, retry=setup.retry, reporter=setup.reporter)


def _notes_base(setup: StoreSetup, tag: str) -> str | None:
    """A placeholder: the download host is known only to a publish that logs in."""
    target = target_of(setup.matrix)
    return None if target is None else \
        f"<B2 download URL>/file/{target.bucket}/{target.prefix}{tag}"


def _locate(want: Wanted, ctx: Context, client: Client | None) -> Located:
    from ninfer_kits.fetch.locate import b2_release

    target = target_of(ctx.matrix)
    return b2_release(want, ctx, target.bucket if target else None,
                      target.prefix if target else "")


def _matrix_needed(ctx: Context) -> str:
    return "B2's bucket is named in its [publish.b2]"


KIND = StoreKind(
    name="b2", publish_rank=0, notes_rank=1, make=_make, extras=("b2sdk",),
    read_table=read_table, add_arguments=_add_arguments, notes_base=_notes_base,
    origin=Origin(locate=_locate, words="B2's friendly URLs", matrix_needed=_matrix_needed))
