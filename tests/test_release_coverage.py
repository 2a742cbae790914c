"""What a user runs is covered by what is signed: every file of a release but the signature is
listed in SHA256SUMS (a real signed release, published to a folder and to the local GitHub
server, walked file by file); the by-hand check that README and docs/release.md show runs, as
shown, against that release; the production matrix declares signing, and a publish to GitHub
or B2 without the key is refused, naming what to set."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED
from ninfer_kits.kit import flavours, kitdir
from ninfer_kits.matrix import GitHubTarget, load_matrix
from ninfer_kits.publish.credentials import SigningKey
from ninfer_kits.release.checksums import parse_sums
from ninfer_kits.release.signatures import NAMESPACE, read_allowed_signers
from test_publish_reproduction import write_record
from test_publish_signing import IDENTITY, SIGNING
from test_publish_support import (
    ASSET,
    CANARY,
    TAG,
    Captured,
    cli,
    compile_program,
    github_store,
    make_kit,
    matrix_file,
    publish,
)

from tools import ROOT

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="ssh-keygen (openssh-client) is not installed")
REPO = "o/r"
UNLISTED = {kitdir.SIGNATURE, kitdir.SHA256SUMS}


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path


class Signed:
    """A kit folder (both tarballs, SBOMs, provenance, a reproduction record) and a matrix with
    [publish.signing], [publish.github] on the local GitHub server, and the key that signs."""

    def __init__(self, place: Path, server: GitHubServer) -> None:
        self.place = place
        self.key = _keygen(place / "release-key")
        kind, blob = (place / "release-key.pub").read_text().split()[:2]
        self.allowed = place / "allowed_signers"
        self.allowed.write_text(f'{IDENTITY} namespaces="{NAMESPACE}" {kind} {blob}\n')
        self.matrix = matrix_file(place, portable=True, github=GitHubTarget(
            repository=REPO, api=server.base_url))
        self.matrix.write_text(self.matrix.read_text() + SIGNING)
        self.kit = make_kit(place / "dist", compile_program(place), portable=True, attested=True,
                            manifest=True)
        self.record = write_record(self.kit, place / "REPRODUCTION.json")


@pytest.fixture(scope="module")
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as running:
        running.add_repo(REPO)
        running.add_token(CANARY)
        yield running


@pytest.fixture(scope="module")
def signed(server: GitHubServer, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    return Signed(tmp_path_factory.mktemp("signed"), server)


@pytest.fixture(scope="module")
def local_release(signed: Signed) -> Path:
    """`publish --to local` of the signed kit: its folder (read-only: copy to change)."""
    done = cli("publish", signed.kit.path, "--to", "local", "--matrix", signed.matrix, "--out",
               signed.place / "out", "--cache-dir", signed.place / "cache", "--ledger-dir",
               signed.place / "releases", "--reproduction", signed.record,
               env={"NINFER_KITS_SIGNING_KEY_FILE": str(signed.key)})
    assert done.returncode == 0, done.stderr
    return signed.place / "out" / TAG


@pytest.fixture(scope="module")
def github_release(signed: Signed, server: GitHubServer) -> dict[str, bytes]:
    """The same kit published to the local GitHub server: its assets, by name."""
    captured = Captured()
    publish(signed.kit.path, load_matrix(signed.matrix),
            [github_store(server, REPO, CANARY, captured.reporter)], signed.place / "gh",
            captured.reporter, signing_key=SigningKey(file=signed.key),
            reproduction=signed.record)
    release = server.snapshot().published(REPO, TAG)
    assert release is not None
    return {asset.name: asset.data for asset in release.assets}


# --------------------------------------------------------------------------- every file listed


def _assert_all_listed(files: dict[str, bytes]) -> None:
    listed = parse_sums(files[kitdir.SHA256SUMS].decode(), 64, "SHA256SUMS")
    assert set(listed) == set(files) - UNLISTED, set(files) ^ set(listed)
    for name, digest in listed.items():
        assert hashlib.sha256(files[name]).hexdigest() == digest, name
    # what README's first command runs, and what was missing before
    assert {kitdir.PYZ, kitdir.SHA1SUMS, "REPRODUCTION.json"} <= set(listed)
    assert {flavours.PORTABLE.asset(ASSET), ASSET.replace(".tar.gz", ".cdx.json")} <= set(listed)


def test_every_file_of_a_local_release_but_the_signature_is_listed(local_release: Path) -> None:
    files = {path.name: path.read_bytes() for path in local_release.iterdir()
             if path.name != "RELEASE.md"}  # the local store's notes: GitHub's release body
    assert kitdir.SIGNATURE in files
    _assert_all_listed(files)
    checked = subprocess.run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=local_release,
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == len(files) - 2


def test_every_file_of_a_github_release_but_the_signature_is_listed(
        github_release: dict[str, bytes], local_release: Path) -> None:
    assert kitdir.SIGNATURE in github_release
    _assert_all_listed(github_release)
    # one release, wherever it is published: the same SHA256SUMS, signed the same
    for name in (kitdir.SHA256SUMS, kitdir.SIGNATURE):
        assert github_release[name] == (local_release / name).read_bytes()


def test_a_release_whose_sha1sums_is_not_the_listed_one_is_refused_by_fetch(
        local_release: Path, signed: Signed, tmp_path: Path) -> None:
    release = tmp_path / "from" / TAG
    shutil.copytree(local_release, release)
    sha1 = release / kitdir.SHA1SUMS
    sha1.write_text(sha1.read_text().replace(sha1.read_text()[:40], "0" * 40, 1))
    canary = tmp_path / "canary"
    canary.write_text("untouched\n")
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", release.parent, "--dest", dest, "--matrix", signed.matrix)
    assert done.returncode == EXIT_CHECK_FAILED, done.stderr
    assert f"{kitdir.SHA1SUMS} does not match {kitdir.SHA256SUMS} (listed " in done.stderr
    assert "Traceback" not in done.stderr
    assert not dest.exists() or list(dest.iterdir()) == []  # nothing left inside DEST
    assert {p.name for p in tmp_path.iterdir()} <= {"box", "canary", "from"}  # nor beside it
    assert canary.read_text() == "untouched\n"


# --------------------------------------------------------------------------- the docs' check


def _sh_block(page: str, containing: str) -> str:
    """The ```sh block of `page` that holds `containing`, as a user copies it."""
    blocks = re.findall(r"^```sh\n(.*?)^```", (ROOT / page).read_text(), re.M | re.S)
    found = [block for block in blocks if containing in block]
    assert len(found) == 1, f"{page}: {len(found)} sh blocks hold {containing!r}"
    return found[0]


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def _git_remote(server: GitHubServer, place: Path, allowed: Path) -> None:
    """The repository's main branch holds allowed_signers (README downloads it from there)."""
    work = place / "work"
    work.mkdir()
    shutil.copy2(allowed, work / "allowed_signers")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "allowed_signers"], ["commit", "-q", "-m", "keys"]):
        subprocess.run([*git, *args], cwd=work, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(place / "bare.git")],
                   check=True)
    server.add_git_remote(REPO, place / "bare.git")


def test_readme_checks_the_pyz_before_it_runs(server: GitHubServer, signed: Signed,
                                              github_release: dict[str, bytes],
                                              tmp_path: Path) -> None:
    """README's block, run as shown against the signed release on the local GitHub server:
    github.com/ninfer-kits/ninfer-kits is its address there, the tag the test kit's."""
    _git_remote(server, tmp_path, signed.allowed)
    script = _sh_block("README.md", "ssh-keygen -Y verify")
    script = script.replace("https://github.com/ninfer-kits/ninfer-kits", f"{server.web_url}/o/r")
    script = re.sub(r"^TAG=\S+", f"TAG={TAG}", script, flags=re.M)
    box = tmp_path / "box"
    box.mkdir()
    done = _bash(script, box)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'Good "{NAMESPACE}" signature for {IDENTITY}' in done.stdout + done.stderr
    assert "ninfer-kits.pyz: OK" in done.stdout
    assert (box / kitdir.PYZ).read_bytes() == github_release[kitdir.PYZ]


def test_release_md_checks_a_folder_of_assets_and_refuses_a_changed_pyz(
        local_release: Path, signed: Signed, tmp_path: Path) -> None:
    script = _sh_block("docs/release.md", "ssh-keygen -Y verify")
    box = tmp_path / "pyz-only"  # what README downloads: the pyz and the two checked files
    box.mkdir()
    for name in (kitdir.PYZ, kitdir.SHA256SUMS, kitdir.SIGNATURE):
        shutil.copy2(local_release / name, box / name)
    shutil.copy2(signed.allowed, box / "allowed_signers")
    done = _bash(script, box)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'Good "{NAMESPACE}" signature for {IDENTITY}' in done.stdout + done.stderr
    assert done.stdout.endswith("\nninfer-kits.pyz: OK\n")  # the one file here it lists
    # a changed pyz fails sha256sum; SHA256SUMS changed to match it fails the signature
    with (box / kitdir.PYZ).open("ab") as pyz:
        pyz.write(b"\n# a line more")
    done = _bash(script, box)
    assert done.returncode != 0 and "ninfer-kits.pyz: FAILED" in done.stdout
    sums = box / kitdir.SHA256SUMS
    digest = hashlib.sha256((box / kitdir.PYZ).read_bytes()).hexdigest()
    sums.write_text(re.sub(r"^\w+(?=  ninfer-kits\.pyz$)", digest, sums.read_text(), flags=re.M))
    done = _bash(script, box)
    assert done.returncode != 0 and "Could not verify signature" in done.stdout + done.stderr
    assert "ninfer-kits.pyz: OK" not in done.stdout  # sha256sum never ran


# --------------------------------------------------------------------------- no unsigned release


def test_the_production_matrix_declares_signing_and_the_workflow_passes_the_key() -> None:
    signing = load_matrix(ROOT / "matrix.toml").publish.signing
    assert signing is not None and signing.identity == IDENTITY
    assert signing.allowed_signers == ROOT / "allowed_signers"
    assert [s.principals for s in read_allowed_signers(signing.allowed_signers)] == [(IDENTITY,)]
    workflow = (ROOT / ".github" / "workflows" / "rebuild.yml").read_text()
    publish_step = workflow[workflow.index("- name: Publish ${{ matrix.kit }}"):]
    publish_step = publish_step[:publish_step.index("- name: Land the ledger")]
    assert "NINFER_KITS_SIGNING_KEY: ${{ secrets.NINFER_KITS_SIGNING_KEY }}" in publish_step


@pytest.mark.parametrize("store", ["github", "b2"])
def test_a_publish_to_github_or_b2_without_the_key_is_refused_naming_it(
        signed: Signed, tmp_path: Path, store: str) -> None:
    matrix = matrix_file(tmp_path, portable=True, github=GitHubTarget(
        repository=REPO, api="http://127.0.0.1:9/api/v3"))  # nothing listens: never reached
    b2 = '\n[publish.b2]\nbucket = "ninfer-kits"\nprefix = "kits/"\n'
    matrix.write_text(matrix.read_text() + b2 + SIGNING)
    shutil.copy2(signed.allowed, tmp_path / "allowed_signers")
    env = {"GITHUB_TOKEN": CANARY, "B2_APPLICATION_KEY_ID": "id", "B2_APPLICATION_KEY": "key"}
    done = cli("publish", signed.kit.path, "--to", store, "--matrix", matrix, "--cache-dir",
               tmp_path / "cache", "--ledger-dir", tmp_path / "releases", env=env)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert ("neither NINFER_KITS_SIGNING_KEY (the private key's text) nor "
            "NINFER_KITS_SIGNING_KEY_FILE (its file) is set") in done.stderr
    assert f"a publish to {store} is always signed" in done.stderr
    assert "Traceback" not in done.stderr and CANARY not in done.stdout + done.stderr
    assert not (tmp_path / "releases").exists()


def test_a_kit_folder_as_build_made_it_is_no_release_but_a_copy_without_its_log_is(
        signed: Signed, tmp_path: Path) -> None:
    """Only publish signs: verify asks no signature of build's own folder, and the same files
    less build.log (a release's shape) are refused without one."""
    built = cli("verify", signed.kit.path, "--matrix", signed.matrix)
    assert built.returncode in (0, 4), built.stderr  # verify's verdict: no NVIDIA driver here
    assert "unsigned: a kit folder as build made it (build.log beside it), not a release" \
        in built.stdout
    copy = tmp_path / TAG
    shutil.copytree(signed.kit.path, copy)
    (copy / kitdir.BUILD_LOG).unlink()
    refused = cli("verify", copy, "--matrix", signed.matrix)
    assert refused.returncode == EXIT_CHECK_FAILED
    assert "SHA256SUMS.sig is missing, and the matrix says releases are signed" in refused.stderr
