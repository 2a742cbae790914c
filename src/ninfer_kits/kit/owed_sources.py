"""SOURCES.json: the Debian source packages a portable kit owes (GPL, LGPL, MPL), recorded by
`build` with all `publish` needs to fetch them, keyrings included, since publish may run where
the toolchain image is gone (docs/portable.md, "Copyleft"). Every field is checked on read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ninfer_kits.errors import BadInput
from ninfer_kits.kit.kitdir import OWED

RECORD = OWED  # in the kit folder, listed in SHA256SUMS; an asset of the release
SCHEMA = 1
MAX_BYTES = 8 << 20  # Debian's keyrings are ~100 kB each; nothing honest comes near this
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]{0,99}")  # a Debian package's name
_VERSION = re.compile(r"(?:[0-9]{1,9}:)?[0-9A-Za-z][0-9A-Za-z.+~-]{0,99}")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}|\./?")  # a suite (flat: ./) or component
_KEYRING = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}\.(?:gpg|asc)")
# Any apt URI (publish fetches only http(s) ones, or a [publish.sources] mirror).
_URI = re.compile(r"[a-z][a-z0-9+.-]{0,30}:[A-Za-z0-9._~%+/:\[\]@=-]{1,1000}")
_FETCHABLE = re.compile(r"https?://[A-Za-z0-9.:\[\]-]+(?:/[A-Za-z0-9._~%+/-]*)?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class BadRecord(BadInput):
    """SOURCES.json is not a record this ninfer-kits reads."""


def archive_stem(name: str, version: str) -> str:
    """name_version without the epoch: how a Debian archive names a source package's files."""
    return f"{name}_{version.partition(':')[2] or version}"


@dataclass(frozen=True)
class SourceFile:

    package: str  # the source package's name
    version: str
    name: str  # its file name, as the archive and the release name it
    path: Path  # in the cache folder
    size: int
    sha256: str


@dataclass(frozen=True)
class Archive:

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]  # () for a flat archive (suite "./")
    keyrings: tuple[str, ...]  # names of Keyrings trusted for it

    @property
    def fetchable(self) -> bool:
        """Whether publish can ask it itself: http(s), not the host's path or mirror list."""
        return _FETCHABLE.fullmatch(self.uri) is not None


def recordable(uri: str) -> bool:
    """Whether `uri` (an apt source's) can be recorded: one word of safe characters."""
    return _URI.fullmatch(uri) is not None


@dataclass(frozen=True)
class Keyring:
    name: str  # its file name (.gpg: binary, .asc: armored, as apt tells them apart)
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class OwedPackage:
    name: str  # the Debian source package
    version: str  # as dpkg has it, epoch included
    binaries: tuple[str, ...]  # the bundled binary packages built from it
    licence: str

    @property
    def stem(self) -> str:
        return archive_stem(self.name, self.version)


@dataclass(frozen=True)
class OwedSources:
    archives: tuple[Archive, ...]
    keyrings: tuple[Keyring, ...]
    packages: tuple[OwedPackage, ...]


def render(record: OwedSources) -> bytes:
    """The record's bytes, sorted: a rebuild makes the same."""
    document = {
        "schema": SCHEMA,
        "archives": [{"uri": a.uri, "suites": list(a.suites), "components": list(a.components),
                      "keyrings": list(a.keyrings)} for a in record.archives],
        "keyrings": [{"name": k.name, "sha256": k.sha256,
                      "base64": base64.b64encode(k.data).decode("ascii")}
                     for k in record.keyrings],
        "packages": [{"name": p.name, "version": p.version, "binaries": list(p.binaries),
                      "licence": p.licence} for p in record.packages],
    }
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8")


def read(path: Path) -> OwedSources:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as error:
        raise BadRecord(f"{path}: cannot read it ({error.strerror or error})") from None
    return parse(data, str(path))


def parse(data: bytes, shown: str) -> OwedSources:
    """The record in `data`; BadRecord naming `shown` and the field that is wrong."""
    if len(data) > MAX_BYTES:
        raise BadRecord(f"{shown}: larger than {MAX_BYTES} bytes: not a sources record")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise BadRecord(f"{shown}: not JSON ({error})") from None
    top = _object(document, ("schema", "archives", "keyrings", "packages"), shown, "")
    if top["schema"] != SCHEMA:
        raise BadRecord(f"{shown}: schema {top['schema']!r}; this ninfer-kits reads schema "
                        f"{SCHEMA} (publish with the ninfer-kits that built the kit)")
    keyrings = tuple(_keyring(item, shown, f"keyrings[{index}]")
                     for index, item in enumerate(_list(top["keyrings"], shown, "keyrings")))
    names = {keyring.name for keyring in keyrings}
    if len(names) != len(keyrings):
        raise BadRecord(f"{shown}: keyrings: a name appears twice")
    archives = tuple(_archive(item, shown, f"archives[{index}]", names)
                     for index, item in enumerate(_list(top["archives"], shown, "archives")))
    packages = tuple(_package(item, shown, f"packages[{index}]")
                     for index, item in enumerate(_list(top["packages"], shown, "packages")))
    if packages and not archives:
        raise BadRecord(f"{shown}: archives: none, for {len(packages)} owed packages")
    return OwedSources(archives, keyrings, packages)


def _object(value: Any, keys: tuple[str, ...], shown: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or sorted(value) != sorted(keys):
        raise BadRecord(f"{shown}: {where or 'the record'}: expected an object with exactly "
                        f"{', '.join(keys)}")
    return value


def _list(value: Any, shown: str, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > 1000:
        raise BadRecord(f"{shown}: {where}: expected a list (of at most 1000)")
    return value


def _text(value: Any, pattern: re.Pattern[str], shown: str, where: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadRecord(f"{shown}: {where}: {_said(value)} is not valid here")
    return value


def _texts(value: Any, pattern: re.Pattern[str], shown: str, where: str) -> tuple[str, ...]:
    return tuple(_text(item, pattern, shown, f"{where}[{index}]")
                 for index, item in enumerate(_list(value, shown, where)))


def _said(value: Any) -> str:
    return ascii(value)[:80] if isinstance(value, str) else f"a {type(value).__name__}"


def _keyring(value: Any, shown: str, where: str) -> Keyring:
    fields = _object(value, ("name", "sha256", "base64"), shown, where)
    name = _text(fields["name"], _KEYRING, shown, f"{where}.name")
    sha256 = _text(fields["sha256"], _SHA256, shown, f"{where}.sha256")
    try:
        data = base64.b64decode(_text(fields["base64"], re.compile(r"[A-Za-z0-9+/=]*"), shown,
                                      f"{where}.base64"), validate=True)
    except binascii.Error as error:
        raise BadRecord(f"{shown}: {where}.base64: not base64 ({error})") from None
    keyring = Keyring(name, data)
    if keyring.sha256 != sha256:
        raise BadRecord(f"{shown}: {where}: its bytes' sha256 is {keyring.sha256}, not the "
                        f"{sha256} it lists")
    return keyring


def _archive(value: Any, shown: str, where: str, keyrings: set[str]) -> Archive:
    fields = _object(value, ("uri", "suites", "components", "keyrings"), shown, where)
    archive = Archive(_text(fields["uri"], _URI, shown, f"{where}.uri"),
                      _texts(fields["suites"], _WORD, shown, f"{where}.suites"),
                      _texts(fields["components"], _WORD, shown, f"{where}.components"),
                      _texts(fields["keyrings"], _KEYRING, shown, f"{where}.keyrings"))
    if not archive.suites:
        raise BadRecord(f"{shown}: {where}.suites: none")
    unknown = sorted(set(archive.keyrings) - keyrings)
    if unknown:
        raise BadRecord(f"{shown}: {where}.keyrings: {', '.join(unknown)} not in keyrings")
    return archive


def _package(value: Any, shown: str, where: str) -> OwedPackage:
    fields = _object(value, ("name", "version", "binaries", "licence"), shown, where)
    licence = fields["licence"]
    if not isinstance(licence, str) or not licence.isprintable() or not 0 < len(licence) < 500:
        raise BadRecord(f"{shown}: {where}.licence: {_said(licence)} is not valid here")
    return OwedPackage(_text(fields["name"], _NAME, shown, f"{where}.name"),
                       _text(fields["version"], _VERSION, shown, f"{where}.version"),
                       _texts(fields["binaries"], _NAME, shown, f"{where}.binaries"), licence)
