"""Signed checksums: SHA256SUMS signed with an OpenSSH signature (SSHSIG), checked offline with
Ed25519 written here from RFC 8032, since the .pyz must verify with python3 alone (docs/fetch.md,
"Signed checksums"; the design: DEVELOPING.md, "Release formats").
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.files import atomic
from ninfer_kits.inspector.inputs import printable

NAMESPACE: Final = "ninfer-kits-checksums"
SIG_SUFFIX: Final = ".sig"
ED25519: Final = "ssh-ed25519"
SSH_KEYGEN: Final = "ssh-keygen"
SSH_KEYGEN_PACKAGE: Final = "openssh-client"
SIGN_TIMEOUT: Final = 60.0  # seconds: signing a small file is instant; a hung one is not

_ARMOR_BEGIN: Final = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END: Final = "-----END SSH SIGNATURE-----"
_MAGIC: Final = b"SSHSIG"
_VERSION: Final = 1
_HASHES: Final = ("sha256", "sha512")  # what PROTOCOL.sshsig allows
_MAX_SIGNATURE_BYTES: Final = 64 << 10  # an Ed25519 SSHSIG is under 300 bytes
# Named so that the message says "unsupported", not "not a key".
_OTHER_KEY_TYPES: Final = ("ssh-rsa", "ssh-dss", "ecdsa-sha2-", "sk-ssh-ed25519@openssh.com",
                           "sk-ecdsa-sha2-", "ssh-ed448")


# RFC 8032 Ed25519

_P: Final = 2**255 - 19  # the field's prime (§5.1)
_L: Final = 2**252 + 27742317777372353535851937790883648493  # the group order (§5.1)
_D: Final = -121665 * pow(121666, -1, _P) % _P  # the curve constant d = -121665/121666
_SQRT_M1: Final = pow(2, (_P - 1) // 4, _P)  # a square root of -1 (§5.1.3 step 3)

# A point in extended homogeneous coordinates (X, Y, Z, T): x = X/Z, y = Y/Z, x*y = T/Z (§5.1.4)
_Point = tuple[int, int, int, int]
_NEUTRAL: Final[_Point] = (0, 1, 1, 0)


def _add(p: _Point, q: _Point) -> _Point:
    """p + q (§5.1.4's formulas; they double a point too)."""
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = t1 * 2 * _D * t2 % _P
    d = z1 * 2 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(scalar: int, point: _Point) -> _Point:
    result = _NEUTRAL
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def _same(p: _Point, q: _Point) -> bool:
    """Whether two points in projective form are one point (X1/Z1 = X2/Z2, Y1/Z1 = Y2/Z2)."""
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _decode_point(encoded: bytes) -> _Point | None:
    """§5.1.3: 32 bytes, little-endian y with x's low bit on top; None off the curve."""
    if len(encoded) != 32:
        return None
    number = int.from_bytes(encoded, "little")
    x_0 = number >> 255
    y = number & ((1 << 255) - 1)
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    if (v * x * x - u) % _P != 0:
        if (v * x * x + u) % _P != 0:
            return None
        x = x * _SQRT_M1 % _P
    if x == 0 and x_0 == 1:
        return None
    if x & 1 != x_0:
        x = _P - x
    return (x, y, 1, x * y % _P)


def _base_point() -> _Point:
    """B: y = 4/5, x positive (§5.1)."""
    y = 4 * pow(5, -1, _P) % _P
    point = _decode_point(y.to_bytes(32, "little"))
    assert point is not None
    return point


_B: Final = _base_point()


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """RFC 8032 §5.1.7: whether `signature` (R || S) is `public_key`'s over `message`. S must be
    below L; checks [S]B = R + [k]A, as OpenSSH does (§5.1.7 allows it)."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = _decode_point(public_key)
    r = _decode_point(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(),
                       "little") % _L
    return _same(_multiply(s, _B), _add(r, _multiply(k, a)))


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _ssh_strings(blob: bytes, count: int, what: str) -> tuple[bytes, ...]:
    """Exactly `count` SSH strings (uint32 length, then the bytes), filling `blob`."""
    items, at = [], 0
    for _ in range(count):
        if at + 4 > len(blob):
            raise ValueError(f"{what} ends early")
        (length,) = struct.unpack_from(">I", blob, at)
        at += 4
        if at + length > len(blob):
            raise ValueError(f"{what} ends early")
        items.append(blob[at:at + length])
        at += length
    if at != len(blob):
        raise ValueError(f"{what} has {len(blob) - at} bytes left over")
    return tuple(items)


def fingerprint(key_blob: bytes) -> str:
    """The key's fingerprint as ssh-keygen shows it: SHA256:<base64 of its sha256, unpadded>."""
    digest = base64.b64encode(hashlib.sha256(key_blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _ed25519_key(key_blob: bytes, what: str) -> bytes:
    """The 32 key bytes of an ssh-ed25519 public key blob."""
    kind, key = _ssh_strings(key_blob, 2, what)
    if kind != ED25519.encode():
        shown = printable(kind.decode("ascii", "replace")) or "?"  # the file's bytes
        raise ValueError(f"{what} is a {shown} key; only {ED25519} is supported")
    if len(key) != 32:
        raise ValueError(f"{what}: an {ED25519} key has 32 bytes, this one {len(key)}")
    return key


@dataclass(frozen=True)
class AllowedSigner:
    """One allowed_signers line: principals, namespaces (None: any), the key."""

    principals: tuple[str, ...]  # names or patterns (`*`, `?`), as OpenSSH reads them
    namespaces: tuple[str, ...] | None
    key_blob: bytes  # the public key as SSH encodes it
    line: int

    @property
    def key(self) -> bytes:
        return _ed25519_key(self.key_blob, "the key")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key_blob)

    def names(self, identity: str) -> bool:
        return any(fnmatch.fnmatchcase(identity, pattern) for pattern in self.principals)

    def allows(self, namespace: str) -> bool:
        return self.namespaces is None or any(
            fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces)


def read_allowed_signers(path: Path) -> tuple[AllowedSigner, ...]:
    """The signers an allowed_signers file lists; BadInput naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such allowed_signers file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise BadInput(f"{path}: cannot read the allowed_signers file ({reason})") from None
    return parse_allowed_signers(text, str(path))


def parse_allowed_signers(text: str, source: str) -> tuple[AllowedSigner, ...]:
    signers = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            signers.append(_signer_line(line, number))
        except ValueError as error:
            raise BadInput(f"{source}:{number}: {error}") from None
    if not signers:
        raise BadInput(f"{source}: lists no signer (a line `PRINCIPAL {ED25519} KEY`, as "
                       f"`ssh-keygen -Y verify` reads it)")
    return tuple(signers)


def _fields(line: str) -> list[str]:
    """Whitespace-separated fields; double quotes keep spaces in one (options, principals)."""
    fields: list[str] = []
    current: list[str] = []
    quoted = started = False
    for char in line:
        if char == '"':
            quoted, started = not quoted, True
            current.append(char)
        elif char.isspace() and not quoted:
            if started:
                fields.append("".join(current))
                current, started = [], False
        else:
            current.append(char)
            started = True
    if quoted:
        raise ValueError("an unclosed quote")
    if started:
        fields.append("".join(current))
    return fields


def _split_options(text: str) -> list[str]:
    """`a,b="x,y",c` → ['a', 'b="x,y"', 'c']: commas inside quotes stay."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _is_key_type(field: str) -> bool:
    return field == ED25519 or field.startswith(_OTHER_KEY_TYPES)


def _signer_line(line: str, number: int) -> AllowedSigner:
    fields = _fields(line)
    if len(fields) < 3:
        raise ValueError(f"expected `PRINCIPALS [OPTIONS] {ED25519} KEY`, got {len(fields)} "
                         f"field{'s' * (len(fields) != 1)}")
    principals = tuple(p for p in fields[0].strip('"').split(",") if p)
    if not principals:
        raise ValueError("no principal")
    namespaces: tuple[str, ...] | None = None
    rest = fields[1:]
    if not _is_key_type(rest[0]):
        for option in _split_options(rest[0]):
            name, _, value = option.partition("=")
            if name.lower() != "namespaces" or not value:
                raise ValueError(f"option {option!r} is not supported (only "
                                 f"namespaces=\"...\")")
            namespaces = tuple(n for n in value.strip('"').split(",") if n)
        rest = rest[1:]
    if len(rest) < 2:
        raise ValueError(f"expected a key type and a key after the principals, as `{ED25519} "
                         f"AAAAC3Nz…`")
    if any(p.startswith("!") for p in (*principals, *(namespaces or ()))):
        # OpenSSH's negation refuses a whole list's match; read as a name it would allow
        raise ValueError("a negated pattern (!…) is not supported")
    kind, encoded = rest[0], rest[1]
    if kind != ED25519:
        raise ValueError(f"key type {kind!r} is not supported: only {ED25519} (make a key with "
                         f"`ssh-keygen -t ed25519`)")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise ValueError("the key is not base64") from None
    _ed25519_key(blob, "the key")
    return AllowedSigner(principals=principals, namespaces=namespaces, key_blob=blob,
                         line=number)


class NotASignature(CheckFailed):
    """A .sig file that is not an SSH signature we can read."""


@dataclass(frozen=True)
class Signature:
    """An SSHSIG, parsed (PROTOCOL.sshsig)."""

    key_blob: bytes
    namespace: str
    reserved: bytes
    hash_algorithm: str
    signature_blob: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key_blob)

    def signed_data(self, message: bytes) -> bytes:
        """What the key signed, laid out as PROTOCOL.sshsig says."""
        digest = hashlib.new(self.hash_algorithm, message).digest()
        return _MAGIC + b"".join(_ssh_string(part) for part in (
            self.namespace.encode(), self.reserved, self.hash_algorithm.encode(), digest))


def parse_signature(data: bytes, shown: str) -> Signature:
    """The armored SSHSIG in `data`; NotASignature names `shown` and what is wrong."""
    try:
        return _parse_signature(data)
    except ValueError as error:
        raise NotASignature(f"{shown} is not an SSH signature: {error}") from None


def _parse_signature(data: bytes) -> Signature:
    if len(data) > _MAX_SIGNATURE_BYTES:
        raise ValueError(f"{len(data):,} bytes (an SSH signature has a few hundred)")
    try:
        lines = data.decode("ascii").strip().splitlines()
    except UnicodeDecodeError:
        raise ValueError("not ASCII text") from None
    if len(lines) < 3 or lines[0].strip() != _ARMOR_BEGIN or lines[-1].strip() != _ARMOR_END:
        raise ValueError(f"no {_ARMOR_BEGIN} … {_ARMOR_END} block")
    try:
        blob = base64.b64decode("".join(line.strip() for line in lines[1:-1]), validate=True)
    except binascii.Error:
        raise ValueError("its body is not base64") from None
    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + 4:
        raise ValueError("no SSHSIG preamble")
    (version,) = struct.unpack_from(">I", blob, len(_MAGIC))
    if version != _VERSION:
        raise ValueError(f"SSHSIG version {version} (this reads version {_VERSION})")
    key_blob, namespace, reserved, hash_algorithm, signature_blob = _ssh_strings(
        blob[len(_MAGIC) + 4:], 5, "the signature")
    if hash_algorithm.decode("ascii", "replace") not in _HASHES:
        raise ValueError(f"hash algorithm {hash_algorithm!r} (PROTOCOL.sshsig allows "
                         f"{' and '.join(_HASHES)})")
    return Signature(key_blob=key_blob, namespace=namespace.decode("utf-8", "replace"),
                     reserved=reserved, hash_algorithm=hash_algorithm.decode("ascii"),
                     signature_blob=signature_blob)


@dataclass(frozen=True)
class Verdict:
    """What a signature check found: good or not, by which key and principal, why."""

    good: bool
    reason: str  # "good signature", or what failed
    fingerprint: str | None = None  # the signing key's, when the signature could be read
    principal: str | None = None  # the identity it was checked for, when good


def verify(message: bytes, signature: bytes, signers: Sequence[AllowedSigner], identity: str,
           *, namespace: str = NAMESPACE, shown: str = "SHA256SUMS") -> Verdict:
    """Whether `signature` over `message` is by a key `signers` lists for `identity` in
    `namespace`; NotASignature when the .sig cannot be read."""
    parsed = parse_signature(signature, f"{shown}{SIG_SUFFIX}")
    print_ = parsed.fingerprint
    if parsed.namespace != namespace:
        return Verdict(False, f"{shown}{SIG_SUFFIX} is signed for another namespace "
                              f"({parsed.namespace!r}, not {namespace!r})", print_)
    known = [signer for signer in signers if signer.key_blob == parsed.key_blob]
    if not known:
        return Verdict(False, f"{shown} is signed by a key not in allowed_signers ({print_})",
                       print_)
    mine = [signer for signer in known if signer.names(identity)]
    if not mine:
        listed = ", ".join(p for signer in known for p in signer.principals)
        return Verdict(False, f"{shown} is signed by key {print_}, which allowed_signers lists "
                              f"for {listed}, not for {identity}", print_)
    if not any(signer.allows(namespace) for signer in mine):
        return Verdict(False, f"{shown} is signed by key {print_}, which allowed_signers does "
                              f"not allow for namespace {namespace!r}", print_)
    try:
        sig_type, raw = _ssh_strings(parsed.signature_blob, 2, "the signature blob")
        key = _ed25519_key(parsed.key_blob, "the signing key")
    except ValueError as error:
        raise NotASignature(f"{shown}{SIG_SUFFIX} is not an SSH signature: {error}") from None
    if sig_type != ED25519.encode():
        kind = printable(sig_type.decode("ascii", "replace"))  # the signature file's bytes
        return Verdict(False, f"{shown}{SIG_SUFFIX} is a {kind} signature; only {ED25519} is "
                              f"supported", print_)
    if not ed25519_verify(key, parsed.signed_data(message), raw):
        return Verdict(False, f"{shown} does not match its signature ({shown}{SIG_SUFFIX}, key "
                              f"{print_})", print_)
    return Verdict(True, f"good signature by {identity} ({print_})", print_, identity)


@dataclass(frozen=True)
class Trust:
    """Who signs releases (the matrix's [publish.signing])."""

    allowed_signers: Path
    identity: str

    def signers(self) -> tuple[AllowedSigner, ...]:
        return read_allowed_signers(self.allowed_signers)


class BadSignature(CheckFailed):
    """A signature that does not hold, or is missing where releases are signed."""


UNSIGNED: Final = "unsigned"


def check_sums(sums: bytes, signature: bytes | None, trust: Trust | None, *,
               insecure: bool = False, shown: str = "SHA256SUMS") -> tuple[str, str | None]:
    """Check SHA256SUMS (`sums`) against its signature (None: none) before anything trusts it:
    (words for the report, a loud warning or None). Which outcome is an error: docs/fetch.md,
    "Signed checksums"; BadSignature (exit 1) unless `insecure`."""
    if trust is None:
        if signature is None:
            return f"{UNSIGNED} (no {shown}{SIG_SUFFIX})", None
        # no one to trust: checked with the key it names, so a changed SHA256SUMS still fails
        try:
            parsed = parse_signature(signature, f"{shown}{SIG_SUFFIX}")
            itself = AllowedSigner(principals=("*",), namespaces=None,
                                   key_blob=parsed.key_blob, line=0)
            verdict = verify(sums, signature, (itself,), "*", shown=shown)
        except NotASignature as error:
            failure = str(error)
        else:
            if verdict.good:
                return (f"{shown}{SIG_SUFFIX} holds for key {parsed.fingerprint}, which nothing "
                        f"vouches for here (no [publish.signing] in the matrix: no "
                        f"allowed_signers)"), None
            failure = verdict.reason
    elif signature is None:
        failure = (f"{shown}{SIG_SUFFIX} is missing, and the matrix says releases are signed "
                   f"(by {trust.identity})")
    else:
        try:
            verdict = verify(sums, signature, trust.signers(), trust.identity, shown=shown)
        except NotASignature as error:
            failure = str(error)
        else:
            if verdict.good:
                return f"{shown}{SIG_SUFFIX} ok ({verdict.reason})", None
            failure = verdict.reason
    if insecure:
        return (f"{UNSIGNED}: the signature did NOT hold (--insecure-no-signature)",
                f"--insecure-no-signature: {failure}; going on WITHOUT a good signature: "
                f"nothing proves these files are the ones the project published")
    raise BadSignature(f"{failure}: refused (--insecure-no-signature skips this check, at your "
                       f"own risk)")


@dataclass(frozen=True)
class Signed:
    """A file signed: its .sig and the signing key's fingerprint."""

    signature: Path
    fingerprint: str


def sign(path: Path, key_file: Path, *, namespace: str = NAMESPACE,
         timeout: float = SIGN_TIMEOUT) -> Signed:
    """Sign `path` with `key_file` (`ssh-keygen -Y sign` on a copy in a private folder, then
    <path>.sig atomically); messages never quote the key. EnvironmentFailure without
    ssh-keygen, CheckFailed when it fails."""
    from ninfer_kits.host import children

    tool = shutil.which(SSH_KEYGEN)
    if tool is None:
        raise EnvironmentFailure(f"signing {path.name} needs {SSH_KEYGEN}, which is not on PATH "
                                 f"(install {SSH_KEYGEN_PACKAGE})")
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-sign-") as scratch:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        result = children.probe([tool, "-Y", "sign", "-f", str(key_file), "-n", namespace,
                                 str(copy)], timeout=timeout)
        made = copy.with_name(copy.name + SIG_SUFFIX)
        if result.returncode != 0 or not made.is_file():
            said = " ".join((result.stderr or result.stdout).split())[:300]
            raise CheckFailed(f"{SSH_KEYGEN} -Y sign of {path.name} failed (exit "
                              f"{result.returncode}): {said or 'no message'} (the key must be "
                              f"an unencrypted OpenSSH {ED25519} private key)")
        data = made.read_bytes()
    parsed = parse_signature(data, f"{path.name}{SIG_SUFFIX}")
    dest = path.with_name(path.name + SIG_SUFFIX)
    atomic.write_file(dest, data)
    return Signed(dest, parsed.fingerprint)
