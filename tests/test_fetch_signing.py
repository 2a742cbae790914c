"""`fetch` and `verify` of signed releases: SHA256SUMS checked against SHA256SUMS.sig before it
is trusted; a tampered, missing or foreign signature refused where the matrix says releases
are signed (--insecure-no-signature: a loud warning instead); an unsigned release of an
unsigned matrix fetched as before, said "unsigned"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ninfer_kits.release.signatures import NAMESPACE
from test_fetch import (
    ASSET,
    KIT,
    RangeServer,
    checkout,
    cli,
    leftovers,
    make_kit,
    publish_folder,
    write_ledger,
)

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="ssh-keygen (openssh-client) is not installed")
IDENTITY = "release@ninfer-kits"


@pytest.fixture(scope="module")
def signed_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dist/<TAG>/ of a small kit, signed; the release key; another key)."""
    place = tmp_path_factory.mktemp("signed-release")
    folder = publish_folder(make_kit(place / "tree", filler=1 << 20), place / "dist")
    keys = []
    for name in ("release", "other"):
        key = place / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)],
                       check=True, stdin=subprocess.DEVNULL)
        keys.append(key)
    _sign(folder / "SHA256SUMS", keys[0])
    return folder, keys[0], keys[1]


def _sign(file: Path, key: Path, namespace: str = NAMESPACE) -> None:
    file.with_name(file.name + ".sig").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace, str(file)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)


def _signed_checkout(tmp_path: Path, server: RangeServer, key: Path) -> Path:
    matrix = checkout(tmp_path, server.url)
    kind, blob = key.with_name(key.name + ".pub").read_text().split()[:2]
    (matrix.parent / "allowed_signers").write_text(
        f'{IDENTITY} namespaces="{NAMESPACE}" {kind} {blob}\n')
    matrix.write_text(matrix.read_text() + '\n[publish.signing]\nallowed_signers = '
                      f'"allowed_signers"\nidentity = "{IDENTITY}"\n')
    return matrix


def _serve(tmp_path: Path, server: RangeServer, release: Path, matrix: Path,
           change: str = "") -> Path:
    """A copy of the release served at /gh, changed as `change` says, with its ledger entry
    (written from the copy: the ledger agrees with what is served)."""
    copy = tmp_path / "served"
    shutil.copytree(release, copy)
    if change == "tampered sums":  # a swapped SHA256SUMS, as a swapped asset needs
        with (copy / "SHA256SUMS").open("a") as sums:
            sums.write(f"{'0' * 64}  extra.tar.gz\n")
    elif change == "flipped signature":
        data = bytearray((copy / "SHA256SUMS.sig").read_bytes())
        data[len(data) // 2] ^= 0x01  # one base64 character of the body: another byte
        (copy / "SHA256SUMS.sig").write_bytes(bytes(data))
    elif change == "no signature":
        (copy / "SHA256SUMS.sig").unlink()
    elif change.startswith("key "):
        _sign(copy / "SHA256SUMS", Path(change[4:]))
    server.add_folder(copy, "/gh")
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"})
    return copy


def test_a_signed_release_is_fetched_and_verified(tmp_path: Path, server: RangeServer,
                                                  signed_release: tuple[Path, Path, Path]
                                                  ) -> None:
    release, key, _other = signed_release
    matrix = _signed_checkout(tmp_path, server, key)
    _serve(tmp_path, server, release, matrix)
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert f"SHA256SUMS.sig ok (good signature by {IDENTITY} (SHA256:" in done.stderr
    # the signature is fetched before the tarball, which SHA256SUMS is trusted for
    paths = [seen.path for seen in server.state.seen]
    assert paths.index("/gh/SHA256SUMS.sig") < paths.index(f"/gh/{ASSET}")
    assert (dest / "SHA256SUMS.sig").read_bytes() == (release / "SHA256SUMS.sig").read_bytes()
    # the manual check the docs show works in DEST
    manual = subprocess.run(
        f"ssh-keygen -Y verify -f {matrix.parent / 'allowed_signers'} -I {IDENTITY} "
        f"-n {NAMESPACE} -s SHA256SUMS.sig < SHA256SUMS && sha256sum -c --ignore-missing "
        f"SHA256SUMS", shell=True, cwd=dest, capture_output=True, text=True)
    assert manual.returncode == 0, manual.stderr
    again = cli("verify", str(dest), "--matrix", str(matrix))
    assert again.returncode == 0, again.stderr
    assert "SHA256SUMS.sig ok" in again.stdout


@pytest.mark.parametrize(("change", "message"), [
    ("tampered sums", "SHA256SUMS does not match its signature"),
    ("flipped signature", "SHA256SUMS"),
    ("no signature", "SHA256SUMS.sig is missing, and the matrix says releases are signed"),
    ("other key", "SHA256SUMS is signed by a key not in allowed_signers"),
])
def test_a_bad_or_missing_signature_is_refused(tmp_path: Path, server: RangeServer,
                                               signed_release: tuple[Path, Path, Path],
                                               change: str, message: str) -> None:
    release, key, other = signed_release
    matrix = _signed_checkout(tmp_path, server, key)
    _serve(tmp_path, server, release, matrix, f"key {other}" if change == "other key" else change)
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 1, done.stderr
    assert message in done.stderr and "refused" in done.stderr
    assert not (dest / "kit").exists() and not (dest / ASSET).exists()
    assert leftovers(dest) == []
    assert not any(seen.path == f"/gh/{ASSET}" for seen in server.state.seen)  # never fetched
    # the explicit way out: it goes on, loudly
    loose = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest),
                "--insecure-no-signature")
    if change == "tampered sums":  # the swapped SHA256SUMS lists a file the release lacks
        assert loose.returncode == 0, loose.stderr
    assert "--insecure-no-signature" in loose.stderr and "WITHOUT a good signature" in \
        loose.stderr
    assert "the signature did NOT hold" in loose.stderr


def test_verify_of_a_release_folder_checks_its_signature(
        tmp_path: Path, server: RangeServer, signed_release: tuple[Path, Path, Path]) -> None:
    release, key, _other = signed_release
    matrix = _signed_checkout(tmp_path, server, key)
    copy = _serve(tmp_path, server, release, matrix)
    (copy / "build.log").unlink()  # a release of it
    done = cli("verify", str(copy), "--matrix", str(matrix))
    assert "SHA256SUMS.sig ok" in done.stdout, done.stderr
    # with no matrix that signs, the signature is checked with the key it names, named
    unsigned_matrix = checkout(tmp_path / "plain", server.url)
    said = cli("verify", str(copy), "--matrix", str(unsigned_matrix))
    assert "SHA256SUMS.sig holds for key SHA256:" in said.stdout, said.stderr
    assert "nothing vouches for here (no [publish.signing]" in said.stdout
    with (copy / "SHA256SUMS").open("a") as sums:  # changed after signing: refused even so
        sums.write("\n")
    changed = cli("verify", str(copy), "--matrix", str(unsigned_matrix))
    assert changed.returncode == 1 and "SHA256SUMS does not match its signature" in \
        changed.stderr
    shutil.copy2(release / "SHA256SUMS", copy / "SHA256SUMS")
    with (copy / "SHA256SUMS.sig").open("r+b") as sig:
        sig.seek(40)
        byte = sig.read(1)
        sig.seek(40)
        sig.write(b"A" if byte != b"A" else b"B")
    bad = cli("verify", str(copy), "--matrix", str(matrix))
    assert bad.returncode == 1, bad.stderr
    assert "refused" in bad.stderr or "is not an SSH signature" in bad.stderr


def test_an_unsigned_release_of_an_unsigned_matrix_says_unsigned(
        tmp_path: Path, server: RangeServer, signed_release: tuple[Path, Path, Path]) -> None:
    release, _key, _other = signed_release
    matrix = checkout(tmp_path, server.url)
    _serve(tmp_path, server, release, matrix, "no signature")
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert "unsigned (no SHA256SUMS.sig)" in done.stderr
    assert not (dest / "SHA256SUMS.sig").exists()
