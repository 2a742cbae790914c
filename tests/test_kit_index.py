"""The kit index (issue 23, items 1 and 6): every publish makes releases/index.json again from
the whole ledger, valid against data/index.schema.json, the same bytes for the same ledger,
with each flavour's needs and the distributions that meet them as judged from its ELF files,
and checked against the release on the stores; `ninfer-kits index --check` finds a stale one.
fetch and kit-url read the index the repository commits (through the local GitHub server's
raw-file route, from a real git repository) for a release the ledger here does not record,
with the real asset names, and go on as before when there is none."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.release import kitindex, ledger
from test_fetch import REPOSITORY, checkout, file_sha256, kit_info, make_kit, publish_folder
from test_fetch import write_ledger as write_fetch_ledger
from test_publish_support import (
    CANARY,
    TAG,
    Captured,
    cli,
    github_store,
    info_for,
    load,
    matrix_file,
    publish,
)
from test_publish_support import make_kit as make_kit_dir

from tools import ROOT

SCHEMA = json.loads((ROOT / "src/ninfer_kits/data" / kitindex.SCHEMA).read_text())
OTHER_TAG = "example-v0.4.0-linux-sm86"


def validate(document: object) -> None:
    import jsonschema

    jsonschema.validate(document, SCHEMA)


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as running:
        running.add_repo("o/r")
        running.add_token(CANARY)
        yield running


def _published_twice(tmp_path: Path, kit: kitdir.KitDir, program: Path,
                     server: GitHubServer) -> Path:
    """Two kits published to GitHub (the local server): the releases/ folder publish wrote."""
    target = GitHubTarget(repository="o/r", api=server.base_url)
    captured = Captured()
    store = github_store(server, "o/r", CANARY, captured.reporter)
    plain = load(matrix_file(_folder(tmp_path / "plain"), github=target))
    assert publish(kit.path, plain, [store], tmp_path, captured.reporter).result == "published"
    # the next version, built portable
    portable = load(matrix_file(_folder(tmp_path / "portable"), github=target, portable=True))
    other = make_kit_dir(tmp_path / "dist", program, tag=OTHER_TAG,
                         info=info_for(version="0.4.0"),
                         asset="ninfer-example-kit-v0.4.0-sm86.tar.gz", portable=True)
    assert publish(other.path, portable, [store], tmp_path, captured.reporter).result == \
        "published"
    return tmp_path / "releases"


def _folder(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_every_publish_makes_an_index_of_the_whole_ledger(
        tmp_path: Path, kit: kitdir.KitDir, program: Path, server: GitHubServer) -> None:
    releases = _published_twice(tmp_path, kit, program, server)
    index = json.loads((releases / kitindex.JSON_NAME).read_text())
    validate(index)
    assert [k["tag"] for k in index["kits"]] == [TAG, OTHER_TAG]  # oldest first
    second = index["kits"][1]
    assert [f["flavour"] for f in second["flavours"]] == ["plain", "portable"]
    held = {r.tag_name: r for r in server.snapshot().of("o/r")}[OTHER_TAG]
    for flavour in second["flavours"]:
        asset = held.asset(flavour["asset"])
        assert asset is not None and (flavour["sha256"], flavour["size"]) == (
            asset.sha256, len(asset.data))
        assert flavour["urls"]["github"].endswith(f"/o/r/releases/download/{OTHER_TAG}/"
                                                  f"{flavour['asset']}")
        # read from the tarball's own ELF files (the test program: libc only; the portable
        # one also carries libbundled.so.1, which it therefore does not need from the system)
        assert flavour["needs"]["sonames"] == ["libc.so.6"]
        assert flavour["needs"]["glibc"] and list(flavour["needs"]["versions"]) == ["libc.so.6"]
        assert "debian-13" in flavour["distributions"]["meets"]
    assert second["driver_minimum"] == "580"  # CUDA 13: data/cuda_drivers.toml
    assert second["stores"]["github"]["repository"] == "o/r"
    assert ledger.parse(second["ledger"]) == ledger.read(releases / f"{OTHER_TAG}.toml")
    # the index is the ledger's: made again, byte for byte; and --check agrees
    before = (releases / kitindex.JSON_NAME).read_bytes()
    assert cli("index", "--ledger-dir", releases, "--check").returncode == 0
    assert cli("index", "--ledger-dir", releases).returncode == 0
    assert (releases / kitindex.JSON_NAME).read_bytes() == before


def test_check_names_an_index_the_ledger_does_not_make(
        tmp_path: Path, kit: kitdir.KitDir, program: Path, server: GitHubServer) -> None:
    releases = _published_twice(tmp_path, kit, program, server)
    (releases / f"{OTHER_TAG}.toml").unlink()
    done = cli("index", "--ledger-dir", releases, "--check")
    assert done.returncode == 1
    assert (f"{releases / kitindex.JSON_NAME}, {releases / kitindex.HTML_NAME}: not the index "
            f"the 1 ledger files of {releases} make") in done.stderr
    assert "Traceback" not in done.stderr


def test_mismatches_name_each_difference(tmp_path: Path, kit: kitdir.KitDir, program: Path,
                                         server: GitHubServer) -> None:
    releases = _published_twice(tmp_path, kit, program, server)
    index = json.loads((releases / kitindex.JSON_NAME).read_text())
    release = index["kits"][0]
    held = {asset["name"]: asset["sha256"] for asset in release["assets"]}
    assert kitindex.mismatches(index, TAG, held) == []
    assert kitindex.mismatches(index, "v9", held) == ["v9 is not in the index"]
    changed = copy.deepcopy(index)
    changed["kits"][0]["flavours"][0]["sha256"] = "0" * 64
    assert kitindex.mismatches(changed, TAG, held) == [
        f"{TAG}: flavour plain says {kit.asset} is sha256 {'0' * 64}, its assets say "
        f"{kit.flavours[0].sha256}"]
    other = dict(held, **{kit.asset: "e" * 64})
    assert kitindex.mismatches(index, TAG, other) == [
        f"{TAG}: {kit.asset} is sha256 {'e' * 64} on the stores, {kit.flavours[0].sha256} in "
        f"the index"]
    fewer = {name: digest for name, digest in held.items() if name != kitdir.BUILDINFO}
    assert kitindex.mismatches(index, TAG, fewer) == [
        f"{TAG}: the index lists {kitdir.BUILDINFO}, which the release does not hold"]


def test_a_client_reads_it_back_through_the_ledgers_reader(
        tmp_path: Path, kit: kitdir.KitDir, program: Path, server: GitHubServer) -> None:
    releases = _published_twice(tmp_path, kit, program, server)
    data = (releases / kitindex.JSON_NAME).read_bytes()
    assert kitindex.parse(data, "index.json") == tuple(ledger.read_all(releases))
    document = json.loads(data)
    for broken, said in (
            (b"{", r"index\.json: not a kit index \(invalid JSON"),
            (json.dumps({"format": 2, "kits": []}).encode(), "not a kit index of format 1"),
            (json.dumps({**document, "kits": {}}).encode(), "key 'kits' must be a list"),
            (json.dumps({**document, "kits": [{"tag": TAG}]}).encode(),
             re.escape("kits[0]: no key 'ledger'")),
            (json.dumps({**document, "kits": [{**document["kits"][0], "tag": "v9"}]}).encode(),
             re.escape(f"kits[0]: tag 'v9' is not its ledger's {TAG!r}")),
            (json.dumps({**document, "kits": [{**document["kits"][0], "ledger": "x = 1\n"}]}
                        ).encode(), re.escape("kits[0].ledger: unsupported format"))):
        with pytest.raises(BadInput, match=said):
            kitindex.parse(broken, "index.json")


# --------------------------------------------------------------------------- fetch, kit-url

ALL_KIT = "ninfer-all-sm86"  # its tag needs {version} and {rev8}: known only after a build
ALL_TAG = "ninfer-all-v0.4.0-linux-sm86-aaaaaaaa"  # what it makes of kit_info's revision
ALL_ASSET = "ninfer-all-kit-aaaaaaaaaaaa-sm86.tar.gz"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("index-release")
    info = dataclasses.replace(kit_info(ALL_KIT), version="0.4.0")
    return publish_folder(make_kit(place / "tree", filler=1 << 20, info=info), place / "dist",
                          tag=ALL_TAG, asset=ALL_ASSET, info=info)


@contextmanager
def _github_with_index(tmp_path: Path, release: Path, *, index: bool
                       ) -> Iterator[GitHubServer]:
    """The local GitHub server with the release published, and the repository's git remote
    holding the publisher's releases/ (with the index that `ninfer-kits index` made) on main."""
    with GitHubServer() as server:
        yield _served(server, tmp_path, release, index)


def _served(server: GitHubServer, tmp_path: Path, release: Path, index: bool) -> GitHubServer:
    server.add_repo(REPOSITORY)
    server.add_release(REPOSITORY, ALL_TAG, assets={
        path.name: path.read_bytes() for path in release.iterdir() if path.name != "build.log"})
    publisher = checkout(tmp_path / "publisher", server.base_url)
    write_fetch_ledger(publisher, release, {
        "github": f"{server.web_url}/{REPOSITORY}/releases/download/{ALL_TAG}"},
        tag=ALL_TAG, kit=ALL_KIT)
    if index:
        assert cli("index", "--ledger-dir", publisher.parent / "releases").returncode == 0
    work = publisher.parent
    bare = tmp_path / "remote.git"
    for command in (["init", "-q", "-b", "main"], ["add", "releases"],
                    ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ledger"]):
        subprocess.run(["git", *command], cwd=work, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    server.add_git_remote(REPOSITORY, bare)
    return server


def test_fetch_and_kit_url_find_through_the_index_what_the_ledger_here_lacks(
        tmp_path: Path, release: Path) -> None:
    with _github_with_index(tmp_path, release, index=True) as server:
        matrix = checkout(tmp_path / "user", server.base_url)  # an empty releases/
        before = cli("kit-url", ALL_KIT, "--matrix", matrix, "--index", "none")
        assert before.returncode == 2 and "name the release's tag" in before.stderr
        shown = cli("kit-url", ALL_KIT, "--all", "--matrix", matrix)
        assert shown.returncode == 0, shown.stderr
        base = f"{server.web_url}/{REPOSITORY}/releases/download/{ALL_TAG}"
        assert shown.stdout.splitlines()[0] == f"{base}/{ALL_ASSET}"  # the recorded name
        assert f"newest release of it is {ALL_TAG} (the kit index" in shown.stderr
        done = cli("fetch", ALL_KIT, "--matrix", matrix, "--dest", tmp_path / "box")
        assert done.returncode in (0, 4), done.stderr  # 4: verify's, on this host
        assert file_sha256(tmp_path / "box" / ALL_ASSET) == file_sha256(release / ALL_ASSET)
        read = server.requests("GET", rf"^/{REPOSITORY}/raw/HEAD/releases/index\.json$")
        assert read and not server.requests("GET", r"/repos/")  # no API, no token


def test_without_an_index_fetch_goes_on_as_before(tmp_path: Path, release: Path) -> None:
    with _github_with_index(tmp_path, release, index=False) as server:
        matrix = checkout(tmp_path / "user", server.base_url)
        done = cli("fetch", ALL_TAG, "--matrix", matrix, "--dest", tmp_path / "box")
        assert done.returncode in (0, 4), done.stderr
        assert file_sha256(tmp_path / "box" / ALL_ASSET) == file_sha256(release / ALL_ASSET)
        assert server.requests("GET", rf"/repos/{REPOSITORY}/releases/tags/{ALL_TAG}$")
        named = cli("kit-url", ALL_KIT, "--matrix", matrix)
        assert named.returncode == 2 and "(not there: it answered 404)" in named.stderr, \
        named.stderr


def _index_file(tmp_path: Path, release: Path, edit: Any) -> Path:
    """An index (a file, --index FILE) of `release`'s ledger entry changed by `edit`."""
    matrix = checkout(tmp_path / "publisher", "http://127.0.0.1:9")
    write_fetch_ledger(matrix, release, {"github": "http://127.0.0.1:9/dl"}, tag=ALL_TAG,
                       kit=ALL_KIT)
    entries = ledger.read_all(matrix.parent / "releases")
    index = kitindex.document([edit(entry) for entry in entries])
    path = tmp_path / "index.json"
    path.write_bytes(kitindex.render(index))
    return path


def test_an_index_naming_a_path_as_an_asset_is_refused(tmp_path: Path, release: Path) -> None:
    def hostile(entry: ledger.LedgerEntry) -> ledger.LedgerEntry:
        return dataclasses.replace(entry, assets=tuple(
            dataclasses.replace(asset, name="../../.bashrc")
            if asset.name == kitdir.BUILDINFO else asset for asset in entry.assets))

    index = _index_file(tmp_path, release, hostile)
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    done = cli("fetch", ALL_TAG, "--matrix", user, "--index", index, "--dest", tmp_path / "box")
    assert done.returncode == 2, done.stderr
    assert "names an asset ../../.bashrc: not a plain file name; refused" in done.stderr
    assert not (tmp_path / "box").exists()


def test_an_index_that_is_not_one_is_bad_input_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text('{"format": 1, "kits": [{"tag": "x"}]}\n')
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    done = cli("kit-url", ALL_TAG, "--matrix", user, "--index", path)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"ninfer-kits: error: {path}: kits[0]: no key 'ledger' (the "
                                   f"release's ledger file)")
