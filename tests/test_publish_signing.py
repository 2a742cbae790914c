"""`publish` of a matrix with [publish.signing]: SHA256SUMS signed before anything is uploaded,
checked against allowed_signers, uploaded as SHA256SUMS.sig and recorded in the ledger; a
wrong or missing key uploads nothing; the key never shows."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ninfer_kits.kit import kitdir
from ninfer_kits.release import ledger
from ninfer_kits.release.signatures import NAMESPACE, read_allowed_signers
from test_publish_support import ASSET, TAG, cli, matrix_file

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="ssh-keygen (openssh-client) is not installed")
IDENTITY = "release@ninfer-kits"
SIGNING = f'\n[publish.signing]\nallowed_signers = "allowed_signers"\nidentity = "{IDENTITY}"\n'


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path


def signed_matrix(folder: Path) -> tuple[Path, Path, Path]:
    """(matrix.toml with [publish.signing], the release key, another key)."""
    keys = folder / "keys"
    keys.mkdir()
    key, other = _keygen(keys / "release"), _keygen(keys / "other")
    kind, blob = (keys / "release.pub").read_text().split()[:2]
    (folder / "allowed_signers").write_text(f'{IDENTITY} namespaces="{NAMESPACE}" {kind} {blob}\n')
    matrix = matrix_file(folder)
    matrix.write_text(matrix.read_text() + SIGNING)
    return matrix, key, other


def _uploaded(out: Path) -> list[Path]:
    """The files a local store holds (its folder is made by its preflight, before signing)."""
    return [path for path in out.rglob("*") if path.is_file()] if out.exists() else []


def _publish(tmp_path: Path, kit: kitdir.KitDir, matrix: Path, env: dict[str, str],
             *more: str) -> subprocess.CompletedProcess[str]:
    return cli("publish", kit.path, "--matrix", matrix, "--out", tmp_path / "published",
               "--cache-dir", tmp_path / "cache", "--ledger-dir", tmp_path / "releases", *more,
               env=env)


def test_publish_signs_and_uploads_the_signature(tmp_path: Path, kit: kitdir.KitDir) -> None:
    matrix, key, _other = signed_matrix(tmp_path)
    done = _publish(tmp_path, kit, matrix, {"NINFER_KITS_SIGNING_KEY_FILE": str(key)})
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "published" / TAG
    assert (folder / kitdir.SIGNATURE).is_file()
    fingerprint = read_allowed_signers(tmp_path / "allowed_signers")[0].fingerprint
    assert f"signed  SHA256SUMS.sig by {IDENTITY}, key {fingerprint}" in done.stdout
    # what a user with ssh-keygen and sha256sum alone runs
    checked = subprocess.run(
        f"ssh-keygen -Y verify -f {tmp_path / 'allowed_signers'} -I {IDENTITY} -n {NAMESPACE} "
        f"-s SHA256SUMS.sig < SHA256SUMS && sha256sum -c SHA256SUMS", shell=True, cwd=folder,
        capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert entry.signed_by == fingerprint
    names = [asset.name for asset in entry.assets]
    assert names[-2:] == [kitdir.SIGNATURE, kitdir.SHA256SUMS]  # the signature before the sums
    assert kitdir.read_kit_dir(folder).signature == folder / kitdir.SIGNATURE
    assert not (kit.path / kitdir.SIGNATURE).exists()  # build's folder stays as built
    again = _publish(tmp_path, kit, matrix, {"NINFER_KITS_SIGNING_KEY_FILE": str(key)})
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing to do:")  # the same bytes: no timestamp in it


def test_a_wrong_key_uploads_nothing(tmp_path: Path, kit: kitdir.KitDir) -> None:
    matrix, _key, other = signed_matrix(tmp_path)
    done = _publish(tmp_path, kit, matrix, {"NINFER_KITS_SIGNING_KEY_FILE": str(other)})
    assert done.returncode == 1, done.stderr
    assert "is not the one allowed_signers lists for release@ninfer-kits" in done.stderr
    assert "signed by a key not in allowed_signers" in done.stderr
    assert "nothing was uploaded" in done.stderr
    assert _uploaded(tmp_path / "published") == []
    assert not (tmp_path / "releases").exists()


def test_the_key_text_never_shows(tmp_path: Path, kit: kitdir.KitDir) -> None:
    matrix, key, other = signed_matrix(tmp_path)
    # the right key as text (a CI secret): signs
    text = key.read_text()
    done = _publish(tmp_path, kit, matrix, {"NINFER_KITS_SIGNING_KEY": text.strip()})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "published" / TAG / kitdir.SIGNATURE).is_file()
    body = [line for line in text.splitlines() if not line.startswith("-----")]
    for line in body:
        assert line not in done.stdout + done.stderr
    # another key's text, with --debug: refused, and no line of it shows
    other_text = other.read_text()
    failed = cli("--debug", "publish", kit.path, "--matrix", matrix, "--out",
                 tmp_path / "other-out", "--cache-dir", tmp_path / "cache", "--ledger-dir",
                 tmp_path / "other-releases", env={"NINFER_KITS_SIGNING_KEY": other_text})
    assert failed.returncode == 1
    for line in other_text.splitlines():
        if not line.startswith("-----"):
            assert line not in failed.stdout + failed.stderr
    # not a key at all, with a canary in it: ssh-keygen fails, the canary never shows
    canary = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYSIGNINGKEY0123456789\n" \
             "-----END OPENSSH PRIVATE KEY-----\n"
    broken = cli("publish", kit.path, "--matrix", matrix, "--out", tmp_path / "broken-out",
                 "--cache-dir", tmp_path / "cache", env={"NINFER_KITS_SIGNING_KEY": canary})
    assert broken.returncode == 1, broken.stderr
    assert "ssh-keygen -Y sign of SHA256SUMS failed" in broken.stderr
    assert "CANARYSIGNINGKEY" not in broken.stdout + broken.stderr
    assert _uploaded(tmp_path / "broken-out") == []


def test_a_dry_run_or_a_local_folder_without_the_key_is_unsigned_and_says_so(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    """Trying the quick start needs no key; a publish to GitHub or B2 without it is refused
    (tests/test_release_coverage.py)."""
    matrix, _key, _other = signed_matrix(tmp_path)
    done = _publish(tmp_path, kit, matrix, {})  # the local store
    assert done.returncode == 0, done.stderr
    assert "no signing key here: this release (a dry run, or a local folder) is unsigned; a " \
           "publish to GitHub or B2 signs SHA256SUMS as release@ninfer-kits" in done.stderr
    assert "unsigned  no SHA256SUMS.sig (no signing key: a dry run, or a local folder)" \
        in done.stdout
    assert not (tmp_path / "published" / TAG / kitdir.SIGNATURE).exists()
    dry = cli("publish", kit.path, "--matrix", matrix, "--dry-run", "--cache-dir",
              tmp_path / "cache", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "unsigned  no SHA256SUMS.sig (no signing key: a dry run, or a local folder)" \
        in dry.stdout
    assert not (tmp_path / "dry-run" / TAG / kitdir.SIGNATURE).exists()
    assert (tmp_path / "dry-run" / TAG / ASSET).is_file()


def test_an_unsigned_matrix_publishes_unsigned_and_says_so(tmp_path: Path,
                                                           kit: kitdir.KitDir) -> None:
    done = _publish(tmp_path, kit, matrix_file(tmp_path), {})
    assert done.returncode == 0, done.stderr
    assert "unsigned  no SHA256SUMS.sig (no [publish.signing] in the matrix)" in done.stdout
    assert ledger.read(tmp_path / "releases" / f"{TAG}.toml").signed_by is None
    assert "signed_by" not in (tmp_path / "releases" / f"{TAG}.toml").read_text()


def test_the_notes_show_how_to_check_the_signature(tmp_path: Path, kit: kitdir.KitDir) -> None:
    from ninfer_kits.publish.stores.local import NOTES_FILE

    matrix, key, _other = signed_matrix(tmp_path)
    done = _publish(tmp_path, kit, matrix, {"NINFER_KITS_SIGNING_KEY_FILE": str(key)})
    assert done.returncode == 0, done.stderr
    body = (tmp_path / "published" / TAG / NOTES_FILE).read_text()
    fingerprint = read_allowed_signers(tmp_path / "allowed_signers")[0].fingerprint
    assert f"OpenSSH signature by `{IDENTITY}` (key `{fingerprint}`)" in body
    assert (f"ssh-keygen -Y verify -f allowed_signers -I {IDENTITY} -n {NAMESPACE} -s "
            f"SHA256SUMS.sig < SHA256SUMS") in body
    from ninfer_kits.publish import notes

    plain = notes.render(kit.info, tag=TAG, asset=ASSET, download_base="https://x/y")
    assert "SHA256SUMS.sig" not in plain  # an unsigned release's notes are as they were
