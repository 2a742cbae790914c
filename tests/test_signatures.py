"""signatures: our SSHSIG + Ed25519 verifier against RFC 8032's vectors and against
`ssh-keygen -Y verify` itself, on real keys made by ssh-keygen; signing through ssh-keygen."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.release import signatures
from ninfer_kits.release.signatures import (
    NAMESPACE,
    BadSignature,
    NotASignature,
    Trust,
    check_sums,
    ed25519_verify,
    parse_allowed_signers,
    read_allowed_signers,
    sign,
    verify,
)

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen (openssh-client) is not installed")
IDENTITY = "release@ninfer-kits"

# RFC 8032 §7.1, TEST 1-3 and TEST 1024's start: (public key, message, signature)
RFC8032 = [
    ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9"
     "b46bd25bf5f0595bbe24655141438e7a100b"),
    ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f1"
     "1d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984d"
     "c6594a7c15e9716ed28dc027beceea1ec40a"),
]


@pytest.mark.parametrize(("public", "message", "signature"), RFC8032)
def test_rfc8032_vectors_pass(public: str, message: str, signature: str) -> None:
    assert ed25519_verify(bytes.fromhex(public), bytes.fromhex(message),
                          bytes.fromhex(signature))


@pytest.mark.parametrize(("public", "message", "signature"), RFC8032)
def test_rfc8032_vectors_altered_fail(public: str, message: str, signature: str) -> None:
    key, data, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    assert not ed25519_verify(key, data + b"\0", sig)
    assert not ed25519_verify(key, data, bytes([sig[0] ^ 1]) + sig[1:])
    assert not ed25519_verify(key, data, sig[:40] + bytes([sig[40] ^ 0x10]) + sig[41:])
    assert not ed25519_verify(bytes([key[0] ^ 1]) + key[1:], data, sig)
    # S + L is the same scalar: RFC 8032 §5.1.7 refuses it (no malleable signatures)
    s = int.from_bytes(sig[32:], "little") + signatures._L
    if s < 2**256:
        assert not ed25519_verify(key, data, sig[:32] + s.to_bytes(32, "little"))
    assert not ed25519_verify(key[:31], data, sig)


# --------------------------------------------------------------------------- real ssh-keygen


@dataclass(frozen=True)
class Keys:
    folder: Path
    key: Path  # private
    other: Path  # another key, not in allowed_signers
    allowed: Path  # allowed_signers: IDENTITY namespaces="ninfer-kits-checksums" <key>


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f",
                    str(path)], check=True, stdin=subprocess.DEVNULL)
    return path


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    folder = tmp_path / "keys"
    folder.mkdir()
    key, other = _keygen(folder / "key"), _keygen(folder / "other")
    public = (folder / "key.pub").read_text().split()
    allowed = folder / "allowed_signers"
    allowed.write_text(f"# who signs releases\n{IDENTITY} namespaces=\"{NAMESPACE}\" "
                       f"{public[0]} {public[1]} release key\n")
    return Keys(folder, key, other, allowed)


def _ssh_sign(path: Path, key: Path, namespace: str = NAMESPACE) -> bytes:
    sig = path.with_name(path.name + ".sig")
    sig.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(path)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return sig.read_bytes()


def _ssh_verify(keys: Keys, data: bytes, sig: bytes, namespace: str = NAMESPACE) -> bool:
    sig_path = keys.folder / "check.sig"
    sig_path.write_bytes(sig)
    done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(keys.allowed), "-I", IDENTITY,
                           "-n", namespace, "-s", str(sig_path)], input=data,
                          capture_output=True)
    return done.returncode == 0


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]


def _flip_sig_byte(sig: bytes) -> bytes:
    """The armored signature with one bit of its Ed25519 signature flipped (re-armored: the
    signature must still parse, or the test proves less)."""
    import base64

    lines = sig.decode().strip().splitlines()
    blob = bytearray(base64.b64decode("".join(lines[1:-1])))
    blob[-10] ^= 1  # inside the 64 signature bytes at the end
    body = base64.b64encode(bytes(blob)).decode()
    return ("\n".join([lines[0], *(body[i:i + 70] for i in range(0, len(body), 70)), lines[-1]])
            + "\n").encode()


SUMS = b"0" * 64 + b"  kit.tar.gz\n" + b"1" * 64 + b"  BUILDINFO.txt\n"
Case = Callable[[Keys, Path], tuple[bytes, bytes, str]]  # (data, sig, namespace verified)


def _good(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return SUMS, _ssh_sign(file, keys.key), NAMESPACE


def _flipped_sums(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return _flip(SUMS, 5), _ssh_sign(file, keys.key), NAMESPACE


def _flipped_sig(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return SUMS, _flip_sig_byte(_ssh_sign(file, keys.key)), NAMESPACE


def _other_key(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return SUMS, _ssh_sign(file, keys.other), NAMESPACE


def _other_namespace(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return SUMS, _ssh_sign(file, keys.key, "file"), NAMESPACE


def _verified_for_git(keys: Keys, file: Path) -> tuple[bytes, bytes, str]:
    return SUMS, _ssh_sign(file, keys.key, "git"), "git"


CASES: dict[str, tuple[Case, bool, str]] = {
    "good": (_good, True, "good signature by release@ninfer-kits"),
    "flipped byte in SHA256SUMS": (_flipped_sums, False, "SHA256SUMS does not match its "
                                                         "signature"),
    "flipped byte in the signature": (_flipped_sig, False, "SHA256SUMS does not match its "
                                                           "signature"),
    "another key": (_other_key, False, "signed by a key not in allowed_signers"),
    "another namespace": (_other_namespace, False, "signed for another namespace"),
    "a namespace allowed_signers does not allow": (_verified_for_git, False,
                                                   "does not allow for namespace 'git'"),
}


@needs_ssh_keygen
@pytest.mark.parametrize("name", CASES)
def test_agrees_with_ssh_keygen(keys: Keys, tmp_path: Path, name: str) -> None:
    make, good, words = CASES[name]
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    data, sig, namespace = make(keys, file)
    verdict = verify(data, sig, read_allowed_signers(keys.allowed), IDENTITY, namespace=namespace)
    assert verdict.good is good
    assert words in verdict.reason
    assert _ssh_verify(keys, data, sig, namespace) is good, "ssh-keygen disagrees"


@needs_ssh_keygen
def test_fingerprint_is_ssh_keygens(keys: Keys) -> None:
    shown = subprocess.run(["ssh-keygen", "-l", "-f", str(keys.key) + ".pub"], check=True,
                           capture_output=True, text=True).stdout.split()[1]
    assert read_allowed_signers(keys.allowed)[0].fingerprint == shown


@needs_ssh_keygen
def test_wrong_identity_fails(keys: Keys, tmp_path: Path) -> None:
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    verdict = verify(SUMS, _ssh_sign(file, keys.key), read_allowed_signers(keys.allowed),
                     "someone@else")
    assert not verdict.good
    assert "lists for release@ninfer-kits, not for someone@else" in verdict.reason


def test_not_a_signature_is_named() -> None:
    signers = parse_allowed_signers(f"x {signatures.ED25519} AAAAC3NzaC1lZDI1NTE5AAAAI"
                                    f"{'A' * 43}\n", "allowed")
    for junk, why in ((b"hello", "no -----BEGIN SSH SIGNATURE-----"),
                      (b"-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n",
                       "not base64"),
                      (b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
                       "no SSHSIG preamble"),
                      (b"\xff" * 10, "not ASCII")):
        with pytest.raises(NotASignature, match=f"SHA256SUMS.sig is not an SSH signature: "
                                                f".*{why}"):
            verify(SUMS, junk, signers, "x")


# --------------------------------------------------------------------------- allowed_signers


@pytest.mark.parametrize(("text", "message"), [
    ("x ssh-rsa AAAAB3NzaC1yc2E=\n", "key type 'ssh-rsa' is not supported: only ssh-ed25519"),
    ("x ecdsa-sha2-nistp256 AAAA\n", "key type 'ecdsa-sha2-nistp256' is not supported"),
    ("x cert-authority ssh-ed25519 AAAA\n", "option 'cert-authority' is not supported"),
    ("x ssh-ed25519 not-base64!\n", "the key is not base64"),
    ("x ssh-ed25519\n", "got 2 fields"),
    ("# nothing\n", "lists no signer"),
    ('x namespaces="a ssh-ed25519 AAAA\n', "an unclosed quote"),
    ("*,!evil ssh-ed25519 AAAA\n", r"a negated pattern \(!…\) is not supported"),
])
def test_allowed_signers_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(BadInput, match=message) as caught:
        parse_allowed_signers(text, "allowed_signers")
    assert str(caught.value).startswith("allowed_signers")


@needs_ssh_keygen
def test_allowed_signers_read(keys: Keys) -> None:
    (signer,) = read_allowed_signers(keys.allowed)
    assert signer.principals == (IDENTITY,)
    assert signer.namespaces == (NAMESPACE,)
    assert signer.line == 2
    assert signer.allows(NAMESPACE) and not signer.allows("git")
    assert len(signer.key) == 32


# --------------------------------------------------------------------------- policy and signing


@needs_ssh_keygen
def test_check_sums_policy(keys: Keys, tmp_path: Path) -> None:
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    sig = _ssh_sign(file, keys.key)
    trust = Trust(keys.allowed, IDENTITY)
    words, warning = check_sums(SUMS, sig, trust)
    assert words.startswith("SHA256SUMS.sig ok (good signature by release@ninfer-kits (SHA256:")
    assert warning is None
    # missing: refused when required, said unsigned when not
    with pytest.raises(BadSignature, match=r"SHA256SUMS\.sig is missing, and the matrix "
                                           r"says releases are signed") as caught:
        check_sums(SUMS, None, trust)
    assert caught.value.exit_code == 1
    assert check_sums(SUMS, None, None) == ("unsigned (no SHA256SUMS.sig)", None)
    # bad: refused, exit 1; with --insecure-no-signature a loud warning instead
    with pytest.raises(BadSignature, match="SHA256SUMS does not match its signature"):
        check_sums(_flip(SUMS, 3), sig, trust)
    words, warning = check_sums(_flip(SUMS, 3), sig, trust, insecure=True)
    assert "did NOT hold" in words and warning is not None and "WITHOUT" in warning
    with pytest.raises(BadSignature, match="is not an SSH signature"):
        check_sums(SUMS, b"junk", trust)
    words, _ = check_sums(SUMS, sig, None)  # nobody to trust: the key it names, named
    assert words.startswith("SHA256SUMS.sig holds for key SHA256:")
    with pytest.raises(BadSignature, match="SHA256SUMS does not match its signature"):
        check_sums(_flip(SUMS, 3), sig, None)


@needs_ssh_keygen
def test_sign_writes_sig_atomically_and_reproducibly(keys: Keys, tmp_path: Path) -> None:
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    signed = sign(file, keys.key)
    assert signed.signature == tmp_path / "SHA256SUMS.sig"
    first = signed.signature.read_bytes()
    assert _ssh_verify(keys, SUMS, first)
    assert signed.fingerprint == read_allowed_signers(keys.allowed)[0].fingerprint
    again = sign(file, keys.key)  # over the old .sig: no prompt, same bytes (no timestamp)
    assert again.signature.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["SHA256SUMS", "SHA256SUMS.sig", "keys"]


@needs_ssh_keygen
def test_sign_failure_never_quotes_the_key(tmp_path: Path) -> None:
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    key = tmp_path / "bad-key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYc2VjcmV0\n"
                   "-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    with pytest.raises(CheckFailed) as caught:
        sign(file, key)
    assert "CANARY" not in str(caught.value)
    assert not (tmp_path / "SHA256SUMS.sig").exists()


def test_sign_without_ssh_keygen_names_the_package(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "SHA256SUMS"
    file.write_bytes(SUMS)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(EnvironmentFailure, match="install openssh-client"):
        sign(file, tmp_path / "key")


# --------------------------------------------------------------------------- [publish.signing]

ED_KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
SIGNING = f"""
[publish.signing]
allowed_signers = "allowed_signers"
identity = "{IDENTITY}"
"""


def _matrix(tmp_path: Path, signing: str = SIGNING,
            allowed: str = f'{IDENTITY} namespaces="{NAMESPACE}" ssh-ed25519 {ED_KEY}\n') -> Path:
    from test_matrix import MINIMAL

    (tmp_path / "allowed_signers").write_text(allowed)
    path = tmp_path / "matrix.toml"
    path.write_text(MINIMAL + signing)
    return path


def test_matrix_signing_table_loads(tmp_path: Path) -> None:
    from ninfer_kits.matrix import load_matrix

    signing = load_matrix(_matrix(tmp_path)).publish.signing
    assert signing is not None
    assert signing.allowed_signers == tmp_path.absolute() / "allowed_signers"
    assert signing.trust == Trust(signing.allowed_signers, IDENTITY)
    from test_matrix import MINIMAL

    (tmp_path / "plain.toml").write_text(MINIMAL)
    assert load_matrix(tmp_path / "plain.toml").publish.signing is None


@pytest.mark.parametrize(("signing", "allowed", "message"), [
    (SIGNING + 'idenity = "x"\n', None, r"\[publish.signing\] key 'idenity': unknown key "
                                         r"'idenity'; did you mean 'identity'\?"),
    (SIGNING.replace(f'identity = "{IDENTITY}"\n', ""), None,
     r"\[publish.signing\] key 'identity': missing required key"),
    (SIGNING.replace(IDENTITY, "relase@ninfer-kits"), None,
     r"key 'identity': allowed_signers lists no key for 'relase@ninfer-kits' .*did you mean "
     r"'release@ninfer-kits'\?"),
    (SIGNING.replace('"allowed_signers"', '"../allowed_signers"'), None,
     r"key 'allowed_signers': invalid path"),
    (SIGNING.replace('"allowed_signers"', '"missing"'), None,
     r"key 'allowed_signers': .*missing: no such allowed_signers file"),
    (SIGNING, f"{IDENTITY} ssh-rsa AAAAB3NzaC1yc2E=\n",
     r"key 'allowed_signers': .*allowed_signers:1: key type 'ssh-rsa' is not supported"),
    (SIGNING, f'{IDENTITY} namespaces="git" ssh-ed25519 {ED_KEY}\n',
     r"key 'identity': allowed_signers allows 'release@ninfer-kits''s key only for other "
     r"namespaces"),
])
def test_matrix_signing_table_says_where(tmp_path: Path, signing: str, allowed: str | None,
                                         message: str) -> None:
    from ninfer_kits.errors import ConfigError
    from ninfer_kits.matrix import load_matrix

    path = _matrix(tmp_path, signing, *(() if allowed is None else (allowed,)))
    with pytest.raises(ConfigError, match=message) as caught:
        load_matrix(path)
    assert str(caught.value).startswith(f"{path}:")
    assert caught.value.where.line is not None


def test_the_pyz_carries_allowed_signers_beside_its_matrix(tmp_path: Path) -> None:
    from ninfer_kits.config import resources
    from ninfer_kits.release import pyz

    (tmp_path / "keys").mkdir()
    path = _matrix(tmp_path, SIGNING.replace('"allowed_signers"', '"keys/allowed_signers"'))
    (tmp_path / "allowed_signers").rename(tmp_path / "keys" / "allowed_signers")
    members = dict(pyz.contents(path))
    base = f"ninfer_kits/{resources.BUNDLED.name}"
    assert members[f"{base}/keys/allowed_signers"] == \
        (tmp_path / "keys" / "allowed_signers").read_bytes()
    assert f"{base}/matrix.toml" in members
    plain = tmp_path / "plain"
    plain.mkdir()
    from test_matrix import MINIMAL

    (plain / "matrix.toml").write_text(MINIMAL)
    assert not any(name.endswith("allowed_signers") for name in dict(pyz.contents(
        plain / "matrix.toml")))


def test_the_ledger_records_the_signing_key() -> None:
    import dataclasses
    import datetime

    from ninfer_kits.release import ledger

    entry = ledger.LedgerEntry(
        tag="t", kit="k", card="c", upstream="o/n", upstream_url="https://x/o/n.git",
        revision="a" * 40, version="", arch="sm_86", cuda_version="13.0", toolchain="tc",
        asset="k.tar.gz", published_at=datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="local", location="/x"),),
        assets=(ledger.LedgerAsset(name="k.tar.gz", size=1, sha256="0" * 64, sha1="0" * 40,
                                   urls=(("local", "file:///x/k.tar.gz"),)),),
        floor=(), signed_by="SHA256:" + "A" * 43)
    text = ledger.render(entry)
    assert 'signed_by = "SHA256:' in text
    assert ledger.parse(text) == entry
    assert ledger.parse(ledger.render(dataclasses.replace(entry, signed_by=None))).signed_by \
        is None
    with pytest.raises(BadInput, match="signed_by must be a key fingerprint"):
        ledger.parse(text.replace("SHA256:" + "A" * 43, "md5:xx"))
