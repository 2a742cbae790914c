"""`ninfer-kits publish`: the local store and --dry-run, the notes, the ledger, the [publish]
table, credentials, the lock and bad input. GitHub, B2 and faults have files of their own."""

from __future__ import annotations

import datetime
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, ConfigError
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget, load_matrix
from ninfer_kits.net import remote
from ninfer_kits.net.retry import RetryPolicy, ServiceFailed, Transient, server_wait
from ninfer_kits.publish import notes
from ninfer_kits.publish.holdings import PublishConflict
from ninfer_kits.publish.plan import AssetTooLarge
from ninfer_kits.publish.stage_functions import PublishBusy, held_lock
from ninfer_kits.publish.stores.local import NOTES_FILE, LocalStore
from ninfer_kits.release import ledger
from ninfer_kits.stores import b2
from ninfer_kits.stores.b2 import B2Target
from test_publish_support import (
    ASSET,
    B2_CANARY,
    CANARY,
    PORTABLE,
    TAG,
    Captured,
    cli,
    cli_started,
    info_for,
    load,
    make_kit,
    matrix_file,
    publish,
)

from tools import ROOT, git

FILES = {ASSET, "BUILDINFO.txt", "SHA1SUMS", "ninfer-kits.pyz", "SHA256SUMS"}


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


# --------------------------------------------------------------------------- the local store


def test_a_local_folder_is_the_default_and_a_rerun_changes_nothing(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    """A release in a local folder only is recorded in no ledger unless --ledger-dir names
    one, and says so; named, the entry and the kit index go there, and a rerun changes
    neither."""
    matrix = matrix_file(tmp_path)  # [publish] without a remote
    args = ("publish", "example", "--dist", tmp_path / "dist", "--matrix", matrix,
            "--out", tmp_path / "published", "--cache-dir", tmp_path / "cache")
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"published {TAG} (kit example)")
    folder = tmp_path / "published" / TAG
    assert {p.name for p in folder.iterdir()} == FILES | {NOTES_FILE}
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True,
                             text=True)
    # every file of the release but the signature (it has none), SHA1SUMS and the pyz too
    assert checked.returncode == 0 and checked.stdout.count(": OK") == len(FILES) - 1, \
        checked.stdout
    assert f"  ledger  not recorded: a release only in a local folder leaves " \
           f"{tmp_path / 'releases'}/ alone (--ledger-dir DIR records it in DIR)\n" in first.stdout
    assert not (tmp_path / "releases").exists()
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"nothing to do: {TAG} is already published on local and "
                                   f"matches the kit\n")

    recorded = cli(*args, "--ledger-dir", tmp_path / "mine")
    assert recorded.returncode == 0, recorded.stderr
    written = tmp_path / "mine" / f"{TAG}.toml"
    assert f"  ledger  {written}\n  index  {tmp_path / 'mine' / 'index.json'} and index.html " \
           f"beside it\n" in recorded.stdout
    entry = ledger.read(written)
    assert entry.url() == (folder / ASSET).as_uri() and [s.name for s in entry.stores] == ["local"]
    before = (written.read_bytes(), written.stat().st_mtime_ns,
              {p: p.stat().st_mtime_ns for p in _files_under(folder)})

    again = cli(*args, "--ledger-dir", tmp_path / "mine")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"nothing to do: {TAG} is already published on local and "
                                   f"matches the kit; the ledger is unchanged")
    assert "(unchanged)" in again.stdout
    after = (written.read_bytes(), written.stat().st_mtime_ns,
             {p: p.stat().st_mtime_ns for p in _files_under(folder)})
    assert after == before
    assert not (tmp_path / "releases").exists()


def test_a_local_publish_in_a_checkout_leaves_it_clean(tmp_path: Path,
                                                        kit: kitdir.KitDir) -> None:
    """Issue 39: publish --to local in the pipeline's checkout, with the tracked kit index,
    left releases/<tag>.toml (a path of this machine in it) and a changed index behind, and
    the next build recorded the checkout as dirty. Now nothing of the checkout changes; asked
    with --ledger-dir releases, the entry and the index are written there, to commit."""
    project = tmp_path / "pipeline"
    (project / "releases").mkdir(parents=True)
    for name in (".gitignore", "releases/index.json", "releases/index.html"):
        shutil.copyfile(ROOT / name, project / name)
    matrix = matrix_file(project)
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "pipeline", cwd=project)

    def status() -> list[str]:
        # (git() strips its output, the first line's leading space too: compare the words)
        said = git("status", "--porcelain", "--untracked-files=all", cwd=project)
        return sorted(" ".join(line.split()) for line in said.splitlines())

    env = {"NINFER_KITS_CACHE": str(tmp_path / "cache")}
    done = cli("publish", kit.path, "--to", "local", "--matrix", matrix, cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert (project / "published" / TAG / ASSET).is_file() and status() == []
    asked = cli("publish", kit.path, "--to", "local", "--matrix", matrix, "--ledger-dir",
                "releases", cwd=project, env=env)
    assert asked.returncode == 0, asked.stderr
    assert f"  ledger  {project / 'releases' / (TAG + '.toml')}\n" in asked.stdout
    assert status() == [f"?? releases/{TAG}.toml", "M releases/index.html",
                        "M releases/index.json"]


def test_the_local_store_refuses_other_content_unless_replace(
        tmp_path: Path, program: Path, kit: kitdir.KitDir) -> None:
    matrix = load(matrix_file(tmp_path))
    captured = Captured()
    out = tmp_path / "published"
    publish(kit.path, matrix, [LocalStore(out)], tmp_path, captured.reporter)
    other = make_kit(tmp_path / "dist2", program, payload=b"another build")
    # the same tag with other tarball bytes: a conflict naming kit, tag and both sha256s
    with pytest.raises(PublishConflict, match=(
            rf"kit example: tag {TAG} is published already with other kit bytes; nothing was "
            rf"changed.*\n.*{re.escape(ASSET)} is sha256 {kit.sha256} there, {other.sha256} in "
            rf"this build")):
        publish(other.path, matrix, [LocalStore(out)], tmp_path, captured.reporter)
    assert (out / TAG / ASSET).read_bytes() == kit.tarball.read_bytes()
    done = publish(other.path, matrix, [LocalStore(out)], tmp_path, captured.reporter,
                   replace=True)
    # BUILDINFO.txt is the same build's; the tarball and both checksum files are not.
    assert done.uploaded == (("local", ASSET), ("local", "SHA1SUMS"), ("local", "SHA256SUMS"))
    assert (out / TAG / ASSET).read_bytes() == other.tarball.read_bytes()
    assert ledger.read(tmp_path / "releases" / f"{TAG}.toml").assets[0].sha256 == other.sha256


def test_dry_run_writes_the_exact_release_and_touches_nothing_remote(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    # Remotes configured, no credentials, an API nothing listens on: a dry run needs none.
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="ninfer-kits/ninfer-kits",
                                                       api="http://127.0.0.1:9/api/v3"),
                         b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    done = cli("publish", kit.path, "--matrix", matrix, "--dry-run", "--cache-dir",
               tmp_path / "cache", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "dry-run" / TAG
    assert f"dry run: nothing was published; {TAG} would go to b2, github" in done.stdout
    assert {p.name for p in folder.iterdir()} == FILES | {NOTES_FILE}
    body = (folder / NOTES_FILE).read_text()
    assert f"http://127.0.0.1:9/ninfer-kits/ninfer-kits/releases/download/{TAG}/{ASSET}" in body
    assert not (tmp_path / "releases").exists()  # no ledger for a dry run
    again = cli("publish", kit.path, "--matrix", matrix, "--dry-run", "--cache-dir",
                tmp_path / "cache", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


WITHOUT_PUBLISH_EXTRA = ("import sys; sys.modules.update(github=None, b2sdk=None)"
                         "; from ninfer_kits.cli import main; sys.exit(main(sys.argv[1:]))")


def test_a_dry_run_needs_no_publish_extra_and_a_real_one_names_it(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    """Without PyGithub and b2sdk, as `pip install .` leaves it (None in sys.modules: an
    import of them fails as for a module not installed): the dry run, which reaches no store,
    still writes the release; a real publish to GitHub is one message naming the extra, exit 3,
    no traceback."""
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="ninfer-kits/ninfer-kits",
                                                       api="https://api.github.com"),
                         b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    command = [sys.executable, "-c", WITHOUT_PUBLISH_EXTRA, "publish", str(kit.path),
               "--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    dry = subprocess.run([*command, "--dry-run"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=False, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert f"{TAG} would go to b2, github" in dry.stdout
    body = (tmp_path / "dry-run" / TAG / NOTES_FILE).read_text()
    assert f"https://github.com/ninfer-kits/ninfer-kits/releases/download/{TAG}/{ASSET}" in body
    real = subprocess.run([*command, "--to", "github"], capture_output=True, text=True,
                          env={**env, "GITHUB_TOKEN": "t0ken"}, cwd=tmp_path, check=False,
                          timeout=120)
    assert real.returncode == 3, real.stderr
    assert ("`ninfer-kits publish` needs PyGithub, which is not installed here: install the "
            "'publish' extra: pip install 'ninfer-kits[publish]'") in real.stderr
    assert "Traceback" not in real.stderr and "t0ken" not in real.stderr


def test_a_portable_sibling_is_published_after_the_tarball_and_recorded(
        tmp_path: Path, program: Path) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True)
    assert kit.portable is not None
    matrix = load(matrix_file(tmp_path, portable=True))
    out = tmp_path / "published"
    done = publish(kit.path, matrix, [LocalStore(out)], tmp_path, Captured().reporter)
    order = [ASSET, PORTABLE, "BUILDINFO.txt", "SHA1SUMS", "ninfer-kits.pyz", "SHA256SUMS"]
    assert [asset.name for asset in done.release.assets] == order
    assert done.uploaded == tuple(("local", name) for name in order)
    sibling = done.release.asset(PORTABLE)
    assert (sibling.path, sibling.size, sibling.sha256, sibling.sha1) == (
        kit.portable.path, kit.portable.size, kit.portable.sha256, kit.portable.sha1)
    assert sibling.content_type == "application/gzip"
    folder = out / TAG
    assert {p.name for p in folder.iterdir()} == FILES | {PORTABLE, NOTES_FILE}
    assert (folder / PORTABLE).read_bytes() == kit.portable.path.read_bytes()
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True,
                             text=True)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == len(order) - 1, \
        checked.stdout
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert (entry.asset, entry.tarballs) == (ASSET, (ledger.LedgerTarball(
        flavour="portable", asset=PORTABLE, sha256=kit.portable.sha256, size=kit.portable.size),))
    assert [a.name for a in entry.assets] == order
    assert entry.url(PORTABLE) == (folder / PORTABLE).as_uri()
    text = (tmp_path / "releases" / f"{TAG}.toml").read_text()
    assert (f'asset = "{ASSET}"\nportable_asset = "{PORTABLE}"\nportable_sha256 = '
            f'"{kit.portable.sha256}"\nportable_size = {kit.portable.size}\npublished_at = ') \
        in text
    body = (folder / NOTES_FILE).read_text()
    assert f"`{PORTABLE}` is the same build carrying its own libraries" in body
    assert "sha256sum -c --ignore-missing SHA256SUMS" in body
    # again: nothing to do, the ledger is unchanged
    again = publish(kit.path, matrix, [LocalStore(out)], tmp_path, Captured().reporter)
    assert again.uploaded == () and not again.ledger_changed


def test_a_kit_without_a_portable_sibling_records_none(tmp_path: Path,
                                                       kit: kitdir.KitDir) -> None:
    done = publish(kit.path, load(matrix_file(tmp_path)), [LocalStore(tmp_path / "out")],
                   tmp_path, Captured().reporter)
    assert PORTABLE not in [asset.name for asset in done.release.assets]
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert entry.tarballs == () and entry.tarball_of("portable") is None
    assert "\nportable_" not in (tmp_path / "releases" / f"{TAG}.toml").read_text()
    assert "-portable" not in done.release.notes


# --------------------------------------------------------------------------- the notes


def test_notes_hold_the_floor_the_commands_the_revision_and_the_license() -> None:
    info = info_for()
    base = "https://github.com/ninfer-kits/ninfer-kits/releases/download/" + TAG
    text = notes.render(info, tag=TAG, asset=ASSET, download_base=base)
    for line in (f"curl -fLO {base}/{ASSET}", f"curl -fLO {base}/SHA256SUMS",
                 # SHA256SUMS lists every file of the release: skip those not downloaded
                 "sha256sum -c --ignore-missing SHA256SUMS", f"tar xzf {ASSET}",
                 f"ninfer-kits verify {ASSET}"):
        assert line in text
    assert "| x86-64 Linux, glibc ≥ 2.34 | highest versioned symbol referenced is GLIBC_2.34 |" \
        in text
    assert "| SASS sm_86 \\| only |" in text  # a | in a cell does not split the table
    assert f"https://github.com/ninfer-kits/example-engine/commit/{info.revision}" in text
    assert "`LICENSE`, `NOTICE`" in text and "redistributed under the upstream's license" in text
    assert "portable" not in text and "sha256sum -c SHA256SUMS" not in text
    real = info_for()
    real = type(real)(**{**real.__dict__, "upstream": "Don-Chad/ninfer-3090",
                         "upstream_url": "https://github.com/Don-Chad/ninfer-3090.git"})
    assert notes.revision_url(real) == \
        f"https://github.com/Don-Chad/ninfer-3090/commit/{real.revision}"


def test_notes_of_a_kit_with_a_portable_sibling_say_what_it_is_and_how_to_get_it() -> None:
    base = "https://github.com/ninfer-kits/ninfer-kits/releases/download/" + TAG
    text = notes.render(info_for(), tag=TAG, asset=ASSET, download_base=base,
                        tarballs=(("portable", PORTABLE),))
    lines = text.splitlines()
    what = next(line for line in lines if line.startswith(f"`{PORTABLE}`"))
    assert "carrying its own libraries" in what and "`kit/lib/`" in what
    assert "`kit/third_party/`" in what and "only glibc and the NVIDIA driver" in what
    assert (f"curl -fLO {base}/{PORTABLE} && curl -fLO {base}/SHA256SUMS && "
            f"sha256sum -c --ignore-missing SHA256SUMS && tar xzf {PORTABLE}") in lines
    # SHA256SUMS lists both tarballs: the plain kit's check skips the one not downloaded
    assert "sha256sum -c --ignore-missing SHA256SUMS" in lines
    assert "sha256sum -c SHA256SUMS" not in lines
    assert lines.index(what) < lines.index("## What a machine needs to run it")


# --------------------------------------------------------------------------- the ledger


def _entry() -> ledger.LedgerEntry:
    info = info_for()
    return ledger.LedgerEntry(
        tag=TAG, kit="example", card=info.card, upstream=info.upstream,
        upstream_url=info.upstream_url, revision=info.revision, version=info.version,
        arch=info.arch, cuda_version=info.cuda_version, toolchain=info.toolchain, asset=ASSET,
        published_at=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="b2", location="b2://ninfer-kits/kits/x/",
                                   details=(("bucket", "ninfer-kits"),)),
                ledger.LedgerStore(name="github", location="https://github.com/o/r/releases/x",
                                   details=(("repository", "o/r"),))),
        assets=(ledger.LedgerAsset(name=ASSET, size=12, sha256="a" * 64, sha1="b" * 40,
                                   urls=(("b2", "https://f000/x"), ("github", "https://gh/x"))),),
        floor=(*info.floor, ('quote " and \\ and \x7f', "tab\there")))


def _portable_entry() -> ledger.LedgerEntry:
    entry = _entry()
    sibling = ledger.LedgerAsset(name=PORTABLE, size=34, sha256="c" * 64, sha1="d" * 40,
                                 urls=(("github", "https://gh/p"),))
    return type(entry)(**{**entry.__dict__, "assets": (entry.assets[0], sibling),
                          "tarballs": (ledger.LedgerTarball(flavour="portable", asset=PORTABLE,
                                                            sha256="c" * 64, size=34),)})


def test_the_ledger_records_the_portable_tarball_and_older_files_read_without_it(
        tmp_path: Path) -> None:
    path = ledger.path_for(tmp_path / "releases", TAG)
    ledger.write(path, _portable_entry())
    read = ledger.read(path)
    assert read == _portable_entry()
    recorded = read.tarball_of("portable")
    assert recorded is not None and (recorded.asset, recorded.sha256, recorded.size) == (
        PORTABLE, "c" * 64, 34)
    assert read.url(PORTABLE) == "https://gh/p"
    # a file written before portable kits (or for a kit without one): no portable keys
    older = ledger.render(_entry())
    assert "portable" not in older
    assert ledger.parse(older).tarball_of("portable") is None
    assert not read.same_release(_entry())


@pytest.mark.parametrize(("change", "message"), [
    (('portable_size = 34\n', ""), "portable_asset, portable_sha256 without portable_size"),
    ((f'portable_asset = "{PORTABLE}"', 'portable_asset = "other-portable.tar.gz"'),
     "portable_asset 'other-portable.tar.gz' is not another asset among [[assets]]"),
    ((f'portable_asset = "{PORTABLE}"', f'portable_asset = "{ASSET}"'),
     "is not another asset among [[assets]]"),
    (("portable_size = 34", "portable_size = 35"),
     f"portable_sha256 and portable_size differ from the [[assets]] entry of {PORTABLE}"),
    (('portable_sha256 = "' + "c" * 64, 'portable_sha256 = "' + "e" * 64), "differ from"),
    (('portable_sha256 = "' + "c" * 64, 'portable_sha256 = "xyz'),
     "portable_sha256 is not a sha256 hex digest"),
    (("portable_size = 34", "portable_size = true"), "portable_size must be a whole number"),
])
def test_a_damaged_portable_record_is_refused(change: tuple[str, str], message: str) -> None:
    text = ledger.render(_portable_entry())
    assert change[0] in text
    with pytest.raises(BadInput, match=re.escape(message)):
        ledger.parse(text.replace(*change), "releases/x.toml")


def test_the_ledger_reads_back_as_written_and_names_urls(tmp_path: Path) -> None:
    entry = _entry()
    path = ledger.path_for(tmp_path / "releases", TAG)
    ledger.write(path, entry)
    read = ledger.read(path)
    assert read == entry
    assert read.url() == "https://f000/x" and read.url(store="github") == "https://gh/x"
    assert "published_at = 2026-01-02T03:04:05Z" in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_a_failed_ledger_write_leaves_the_previous_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = ledger.path_for(tmp_path, TAG)
    ledger.write(path, _entry())
    before = path.read_bytes()

    def broken(*_: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "replace", broken)
    changed = _entry()
    changed = type(changed)(**{**changed.__dict__, "version": "9.9.9"})
    with pytest.raises(OSError):
        ledger.write(path, changed)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize(("change", "message"), [
    (("format = 1", "format = 2"), "unsupported format 2"),
    (("sha1 = \"" + "b" * 40, "sha1 = \"" + "z" * 40), "sha1 is not a sha1 hex digest"),
    (("asset = \"" + ASSET, "asset = \"other.tar.gz"), "is not among"),
    (("[stores.", "[other."), "no [stores.NAME] table"),
])
def test_a_damaged_ledger_is_refused_naming_what_is_wrong(
        tmp_path: Path, change: tuple[str, str], message: str) -> None:
    text = ledger.render(_entry()).replace(*change)
    with pytest.raises(BadInput, match=re.escape(message)):
        ledger.parse(text, "releases/x.toml")


def test_the_ledger_format_is_documented_key_by_key() -> None:
    readme = (ROOT / "releases" / "README.md").read_text()
    text = ledger.render(_portable_entry())
    keys = set(re.findall(r"^([a-z_0-9]+) = ", text, re.MULTILINE)) - {"b2", "github"}
    missing = [key for key in sorted(keys) if f"`{key}`" not in readme]
    assert not missing, f"releases/README.md does not document {missing}"
    for table in ("[stores.NAME]", "[[assets]]", "[assets.urls]", "[[floor]]"):
        assert table in readme


# --------------------------------------------------------------------------- the matrix


PUBLISH_ERRORS = [
    ('[publish.github]\nrepository = "nope"\n', r"\[publish\.github\] key 'repository': "
     r"invalid repository 'nope' \(expected OWNER/NAME\)"),
    ('[publish.github]\nrepository = "o/r"\napi = "http://github.example.com/api/v3"\n',
     r"key 'api': .*plain http would send the token in clear"),
    ('[publish.github]\nrepository = "o/r"\napi = "https://user:secret@example.com/api/v3"\n',
     r"key 'api': .*must not hold credentials"),
    ('[publish.github]\nrepository = "o/r"\nurl = "https://example.com"\n',
     r"key 'url': unknown key 'url'"),
    ('[publish.b2]\nbucket = "b2-bad"\n', r"\[publish\.b2\] key 'bucket': invalid B2 bucket"),
    ('[publish.b2]\nbucket = "ninfer-kits"\nprefix = "kits"\n',
     r"key 'prefix': invalid key prefix 'kits': must end with '/' .*did you mean 'kits/'\?"),
    ('[publish.b2]\nbucket = "ninfer-kits"\nprefix = "/kits/"\n', r"must not start with '/'"),
    ('[publish.b2]\nbucket = "ninfer-kits"\nprefix = "a/../"\n', r"'\.\.' segment"),
    ('[publish]\nledger = "pull_request"\n',
     r"\[publish\] key 'ledger': unknown ledger mode 'pull_request'; did you mean "
     r"'pull-request'\?"),
    ('[publish]\nledgr = "commit"\n', r"unknown key 'ledgr'; did you mean 'ledger'\?"),
]


@pytest.mark.parametrize(("table", "message"), PUBLISH_ERRORS)
def test_a_bad_publish_table_says_where_and_what(tmp_path: Path, table: str,
                                                 message: str) -> None:
    text = (ROOT / "matrix.toml").read_text()
    text = text[: text.index("\n[publish]")] + "\n" + table
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_matrix(path)
    line = text.split("\n").index(table.split("\n")[-2]) + 1
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_the_production_matrix_publishes_to_b2_then_github() -> None:
    publish_table = load_matrix(ROOT / "matrix.toml").publish
    assert publish_table.remotes == ("b2", "github")
    assert publish_table.github == GitHubTarget(repository="ninfer-kits/ninfer-kits",
                                                api="https://api.github.com")
    assert publish_table.targets["b2"] == B2Target(bucket="ninfer-kits", prefix="kits/")
    assert publish_table.ledger == "commit"


# --------------------------------------------------------------------------- bad input


def test_a_kit_folder_without_sha256sums_is_refused_and_nothing_published(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    (kit.path / "SHA256SUMS").unlink()
    done = cli("publish", kit.path, "--matrix", matrix_file(tmp_path), "--out",
               tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert done.returncode == 1
    assert f"error: kit folder {kit.path}: SHA256SUMS missing" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "releases").exists()


def test_a_kit_folder_whose_files_do_not_match_is_refused(tmp_path: Path,
                                                          kit: kitdir.KitDir) -> None:
    data = bytearray(kit.tarball.read_bytes())
    data[-100] ^= 0xFF
    kit.tarball.write_bytes(bytes(data))
    done = cli("publish", kit.path, "--matrix", matrix_file(tmp_path), "--out",
               tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert done.returncode == 1
    assert f"{ASSET} does not match SHA256SUMS" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_asset_over_2_gib_is_refused_before_anything_is_touched(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    with kit.tarball.open("r+b") as handle:  # sparse: 2 GiB and one byte, no disk used
        handle.truncate(2 * 1024**3 + 1)
    from ninfer_kits.publish.stores.github import GitHubStore

    target = GitHubTarget(repository="o/r", api="http://127.0.0.1:9/api/v3")
    store = GitHubStore(target, remote.Secret(CANARY, "GITHUB_TOKEN"),
                        retry=RetryPolicy(attempts=1), reporter=Captured().reporter)
    started = time.monotonic()
    with pytest.raises(AssetTooLarge, match=r"2,147,483,649 bytes is more than GitHub o/r .* "
                       r"takes in one asset \(2,147,483,647 bytes\); nothing was uploaded"):
        publish(kit.path, load(matrix_file(tmp_path)), [store], tmp_path, Captured().reporter)
    assert time.monotonic() - started < 5  # refused by size, before any hashing or request


def test_a_renamed_kit_folder_is_refused(tmp_path: Path, kit: kitdir.KitDir) -> None:
    moved = kit.path.with_name("example-v0.4.0-linux-sm86")
    kit.path.rename(moved)
    with pytest.raises(BadInput, match=r"matrix.toml renders tag 'example-v0.3.0-linux-sm86' "
                       r".* but the folder holds 'example-v0.4.0-linux-sm86'"):
        publish(moved, load(matrix_file(tmp_path)), [LocalStore(tmp_path / "o")], tmp_path,
                Captured().reporter)


def test_a_folder_that_disagrees_with_portable_in_the_matrix_is_refused(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    with pytest.raises(BadInput, match=r"matrix.toml says portable = true for kit example, but "
                                       r"the folder holds no portable tarball"):
        publish(kit.path, load(matrix_file(tmp_path, portable=True)),
                [LocalStore(tmp_path / "o")], tmp_path, Captured().reporter)
    assert not (tmp_path / "o").exists()


def test_a_kit_is_found_by_name_in_dist(tmp_path: Path, program: Path) -> None:
    matrix = matrix_file(tmp_path)
    none = cli("publish", "example", "--dist", tmp_path / "dist", "--matrix", matrix)
    assert none.returncode == 2 and "no such folder" in none.stderr
    (tmp_path / "dist").mkdir()
    missing = cli("publish", "example", "--dist", tmp_path / "dist", "--matrix", matrix)
    assert "no finished kit folder of kit example" in missing.stderr
    assert "ninfer-kits build example" in missing.stderr
    typo = cli("publish", "exampel", "--dist", tmp_path / "dist", "--matrix", matrix)
    assert typo.returncode == 2 and "did you mean 'example'?" in typo.stderr
    make_kit(tmp_path / "dist", program)
    make_kit(tmp_path / "dist", program,
             info=info_for(revision="1" * 40, version="0.3.1"),
             tag="example-v0.3.1-linux-sm86", asset="ninfer-example-kit-v0.3.1-sm86.tar.gz")
    two = cli("publish", "example", "--dist", tmp_path / "dist", "--matrix", matrix)
    assert two.returncode == 2 and "2 finished kit folders of kit example" in two.stderr


def test_github_needs_its_table_and_a_safe_api_url(tmp_path: Path, kit: kitdir.KitDir) -> None:
    matrix = matrix_file(tmp_path)
    done = cli("publish", kit.path, "--matrix", matrix, "--to", "github")
    assert done.returncode == 2 and "no [publish.github] table" in done.stderr
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                       api="https://api.github.com"))
    done = cli("publish", kit.path, "--matrix", matrix, "--github-api",
               "http://ghe.example.com/api/v3", env={"GITHUB_TOKEN": CANARY})
    assert done.returncode == 2 and "plain http would send the token in clear" in done.stderr


# --------------------------------------------------------------------------- credentials


def test_missing_credentials_name_the_variables(tmp_path: Path, kit: kitdir.KitDir) -> None:
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                       api="http://127.0.0.1:9/api/v3"),
                         b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    common = ("publish", kit.path, "--matrix", matrix, "--cache-dir", tmp_path / "c")
    github = cli(*common, "--to", "github")
    assert github.returncode == 2
    assert "GitHub: no token: set GITHUB_TOKEN (or GH_TOKEN)" in github.stderr
    b2 = cli(*common, "--to", "b2")
    assert b2.returncode == 2
    assert "B2: B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY are not set" in b2.stderr
    one = cli(*common, "--to", "b2", env={"B2_APPLICATION_KEY_ID": "005abc"})
    assert "B2: B2_APPLICATION_KEY is not set" in one.stderr
    env_file = tmp_path / "b2.env"
    env_file.write_text(f"B2_APPLICATION_KEY={B2_CANARY}\n")
    half = cli(*common, "--to", "b2", env={"NINFER_B2_ENV": str(env_file)})
    assert f"B2: the env file {env_file} does not set B2_APPLICATION_KEY_ID" in half.stderr
    for done in (github, b2, one, half):
        assert B2_CANARY not in done.stdout + done.stderr
    assert not (tmp_path / "releases").exists()


def test_every_missing_credential_is_named_at_once(tmp_path: Path, kit: kitdir.KitDir) -> None:
    # Both remotes, nothing set: one run names the GitHub token and both B2 variables (not
    # the B2 pair, then the token on the next run).
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                       api="http://127.0.0.1:9/api/v3"),
                         b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    done = cli("publish", kit.path, "--matrix", matrix, "--cache-dir", tmp_path / "c")
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ninfer-kits:")]
    assert len(errors) == 1, done.stderr
    for needle in ("B2: B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY are not set",
                   "GitHub: no token: set GITHUB_TOKEN (or GH_TOKEN)"):
        assert needle in errors[0], errors[0]
    assert "Traceback" not in done.stderr and not (tmp_path / "releases").exists()


def test_a_missing_matrix_file_is_said_as_such(tmp_path: Path, kit: kitdir.KitDir) -> None:
    env = {"NINFER_KITS_MATRIX": ""}
    for args in ((), ("--to", "github"), ("--matrix", tmp_path / "nothere.toml")):
        done = cli("publish", kit.path, "--cache-dir", tmp_path / "c", *args, cwd=tmp_path,
                   env=env)
        where = args[1] if args and args[0] == "--matrix" else "matrix.toml"
        assert done.returncode == 2, done.stderr
        assert f"ninfer-kits: error: matrix file not found: {where} (give --matrix PATH or set " \
            f"NINFER_KITS_MATRIX)" in done.stderr, done.stderr
        assert "[publish" not in done.stderr and "Traceback" not in done.stderr


def test_tokens_and_keys_come_from_their_variables_and_env_files(tmp_path: Path) -> None:
    assert remote.github_token({"GH_TOKEN": CANARY}, "o/r").source == "GH_TOKEN"
    both = {"GITHUB_TOKEN": CANARY, "GH_TOKEN": "other-token-value"}
    assert remote.github_token(both, "o/r").value == CANARY
    env_file = tmp_path / "b2.env"
    env_file.write_text("# the seed's rented-box file\nexport B2_APPLICATION_KEY_ID='005abc'\n"
                        f'B2_APPLICATION_KEY="{B2_CANARY}"\nB2_BUCKET=ninfer-kits # unused\n')
    key_id, key = b2.b2_key({"NINFER_B2_ENV": str(env_file)})
    assert (key_id, key.value, key.source) == ("005abc", B2_CANARY, str(env_file))
    assert B2_CANARY not in repr(key) + str(key)
    given = b2.b2_key({"B2_APPLICATION_KEY_ID": "x", "B2_APPLICATION_KEY": "y" * 8},
                               env_file)
    assert given[0] == "005abc"  # --b2-env wins over the variables
    env_file.write_text(f"B2_APPLICATION_KEY_ID=005abc\nthis line holds {B2_CANARY}\n")
    with pytest.raises(BadInput, match=r"line 2: not a KEY=VALUE line$") as caught:
        b2.b2_key({}, env_file)
    assert B2_CANARY not in str(caught.value)
    assert remote.redact(f"token {CANARY} and key {B2_CANARY}") == "token *** and key ***"


# --------------------------------------------------------------------------- retries


def test_retries_wait_what_the_server_asks_with_a_bound() -> None:
    now = 1_700_000_000.0
    assert server_wait({"Retry-After": "7"}, now) == 7.0
    assert server_wait({"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, now) == 10.0
    assert server_wait({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(now) + 30)},
                       now) == 31.0
    assert server_wait({"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": "1"}, now) is None
    slept: list[float] = []
    policy = RetryPolicy(attempts=3, first_delay=1.0, sleep=slept.append)
    calls = iter([Transient("HTTP 502"), Transient("HTTP 502", wait=5.0), None])

    def failing() -> None:
        raise OSError("boom")

    with pytest.raises(ServiceFailed, match=r"GitHub: x: still failing after 3 tries \(HTTP "
                       r"502\); run it again later"):
        policy.call("GitHub: x", failing, lambda _: next(calls) or Transient("HTTP 502"))
    assert 0.75 <= slept[0] <= 1.25 and slept[1] == 5.0
    patient = RetryPolicy(attempts=5, longest_wait=60, sleep=slept.append)
    with pytest.raises(ServiceFailed, match="asks us to wait 3600 s"):
        patient.call("GitHub: y", failing, lambda _: Transient("rate limit", wait=3600))
    with pytest.raises(OSError, match="boom"):  # not transient: no retry
        patient.call("GitHub: z", failing, lambda _: None)


# --------------------------------------------------------------------------- the lock


def test_a_second_publish_of_a_tag_stops_naming_the_first_or_waits(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    lock_file = tmp_path / "cache" / "publish" / f"{TAG}.lock"
    lock_file.parent.mkdir(parents=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()}\n".encode())
    args = ("publish", kit.path, "--matrix", matrix_file(tmp_path), "--out", tmp_path / "out",
            "--cache-dir", tmp_path / "cache")
    try:
        busy = cli(*args)
        assert busy.returncode == 3
        assert f"another publish of {TAG} is running (PID {os.getpid()}" in busy.stderr
        assert not (tmp_path / "out").exists()
        # The lock is let go once the second publish says it waits, not after a set time: on
        # a loaded machine its start alone may take longer than any timer.
        waiting = cli_started(*args, "--wait", "30")
        assert waiting.stderr is not None
        said = []
        for line in waiting.stderr:
            said.append(line)
            if f"waiting for another publish of {TAG} (PID {os.getpid()})" in line:
                break
        else:
            raise AssertionError("".join(said))
        os.close(fd)
        rest = waiting.communicate(timeout=120)[1]
    finally:
        with pytest.raises(OSError):
            os.close(fd)
    assert waiting.returncode == 0, "".join(said) + (rest or "")


def test_the_lock_is_one_holder_at_a_time_in_process(tmp_path: Path) -> None:
    reporter = Captured().reporter
    with (held_lock(tmp_path, TAG, 0, reporter), pytest.raises(PublishBusy),
          held_lock(tmp_path, TAG, 0.2, reporter)):
        pass
    with held_lock(tmp_path, TAG, 0, reporter):  # released when the holder ended
        pass


def test_help_lists_publish() -> None:
    done = cli("--help")
    assert "publish" in done.stdout
    done = cli("publish", "--help")
    assert "--dry-run" in done.stdout and "--replace" in done.stdout and shutil.which("sha256sum")


def test_on_github_actions_steps_fold_and_outputs_name_the_ledger(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    outputs, summary = tmp_path / "outputs", tmp_path / "summary.md"
    done = cli("publish", kit.path, "--matrix", matrix_file(tmp_path, ledger="pull-request"),
               "--out", tmp_path / "out", "--cache-dir", tmp_path / "cache",
               "--ledger-dir", tmp_path / "releases",
               env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs),
                    "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0, done.stderr
    for step in ("kit", "preflight", "plan", "inspect", "local", "ledger"):
        assert f"::group::{step}\n" in done.stderr
    assert outputs.read_text().splitlines() == [
        f"tag={TAG}", "changed=true", f"ledger={tmp_path / 'releases' / (TAG + '.toml')}",
        "ledger_mode=pull-request", "outcome=published"]
    assert f"### publish `{TAG}`: published" in summary.read_text()
    assert f"| {ASSET} | {kit.size:,} | `{kit.sha256}` |" in summary.read_text()


def test_github_notes_show_the_pyz_one_liner() -> None:
    """Releases carry ninfer-kits.pyz; GitHub's notes say how to use it with python3 alone."""
    from ninfer_kits.publish.stage_functions import _fetch_hint

    base = f"https://github.com/o/r/releases/download/{TAG}"
    assert _fetch_hint(base) == " --repository o/r"
    assert _fetch_hint("https://f000.backblazeb2.com/file/b/kits/") is None
