"""An independent rebuild, published (issue 22 item 6): `publish --reproduction FILE` puts
REPRODUCTION.json in the release, listed in SHA256SUMS, and its result in the notes and the
ledger, on the local store and on GitHub (the local GitHub server); `fetch` brings it with the
kit and `verify` shows it, in text and JSON. A differing rebuild is published saying so; a
malformed record, or one of another build, is bad input naming the file and key; a release
without one still verifies, "not independently reproduced"."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.release import ledger, reproduction
from test_publish_support import (
    CANARY,
    TAG,
    Captured,
    cli,
    github_store,
    load,
    matrix_file,
    publish,
)
from test_verify import validate_schema

RUN = "https://github.com/o/r/actions/runs/4242"
WHEN = datetime.datetime(2026, 12, 1, 6, 23, 45, tzinfo=datetime.UTC)


def write_record(kit: kitdir.KitDir, path: Path, *, result: str = reproduction.IDENTICAL,
                 differences: tuple[str, ...] = (), **changes: Any) -> Path:
    """The record the reproduce job's `repro --against --record` writes for `kit`."""
    fields: dict[str, Any] = {
        "kit": kit.kit, "tag": kit.tag,
        "compared": {flavour.asset: flavour.sha256 for flavour in kit.flavours},
        "result": result, "summary": "identical bytes" if not differences else
        f"{len(differences)} file(s) differ", "differences": differences, "run": RUN,
        "when": WHEN} | changes
    path.write_bytes(reproduction.render(reproduction.make(**fields)))
    return path


def publish_local(tmp_path: Path, kit: kitdir.KitDir, *more: str | Path,
                  out: str = "published") -> subprocess.CompletedProcess[str]:
    return cli("publish", kit.path, "--matrix", matrix_file(tmp_path), "--out", tmp_path / out,
               "--cache-dir", tmp_path / "cache", "--ledger-dir", tmp_path / "releases", *more)


def verify_json(folder: Path) -> dict[str, Any]:
    done = cli("verify", folder, "--json", "--matrix", folder.parent.parent / "matrix.toml")
    assert done.returncode in (0, 4), done.stderr  # 4: the host lacks what the kit needs
    document: dict[str, Any] = json.loads(done.stdout)
    validate_schema(document)  # data/verify.schema.json describes the new key
    return document


def test_the_local_release_carries_it_signed_listed_noted_and_verified(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    built_sums = (kit.path / kitdir.SHA256SUMS).read_bytes()
    done = publish_local(tmp_path, kit, "--reproduction", record)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "published" / TAG
    assert (folder / reproduction.NAME).read_bytes() == record.read_bytes()  # as handed over
    assert (kit.path / kitdir.SHA256SUMS).read_bytes() == built_sums  # build's folder as built
    assert not (kit.path / reproduction.NAME).exists()
    listed = (folder / kitdir.SHA256SUMS).read_text()
    assert f"  {reproduction.NAME}\n" in listed
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True,
                             text=True)
    assert checked.returncode == 0 and "REPRODUCTION.json: OK" in checked.stdout
    assert kitdir.read_kit_dir(folder).reproduction == folder / reproduction.NAME

    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert entry.reproduction is not None
    assert (entry.reproduction.result, entry.reproduction.date, entry.reproduction.run) == \
        ("identical", "2026-12-01T06:23:45Z", RUN)
    assert entry.reproduction.sha256 == next(
        a.sha256 for a in entry.assets if a.name == reproduction.NAME)
    assert "\n[reproduction]\n" in (tmp_path / "releases" / f"{TAG}.toml").read_text()
    notes = (folder / "RELEASE.md").read_text()
    assert f"Independently reproduced on 2026-12-01 by {RUN} (identical bytes)." in notes

    document = verify_json(folder)
    assert document["reproduction"]["result"] == "identical"
    assert document["reproduction"]["run"] == RUN
    assert document["reproduction"]["words"] == \
        f"independently reproduced on 2026-12-01 by {RUN} (identical bytes)"
    text = cli("verify", folder, "--matrix", tmp_path / "matrix.toml")
    assert f"Repro   independently reproduced on 2026-12-01 by {RUN}" in text.stdout
    # the tarball, BUILDINFO.txt, the record, SHA1SUMS and the pyz: every file but the .sig
    assert "SHA256SUMS ok (5 files)" in text.stdout

    # fetch from the release folder: DEST holds the record, and verify of DEST shows it
    dest = tmp_path / "box"
    fetched = cli("fetch", TAG, "--from", tmp_path / "published", "--dest", dest,
                  "--matrix", tmp_path / "matrix.toml")
    assert fetched.returncode in (0, 4), fetched.stderr
    assert (dest / reproduction.NAME).read_bytes() == record.read_bytes()
    shown = cli("verify", dest, "--matrix", tmp_path / "matrix.toml")
    assert f"independently reproduced on 2026-12-01 by {RUN}" in shown.stdout, shown.stderr

    # the same inputs, the same bytes: publishing again changes nothing
    again = publish_local(tmp_path, kit, "--reproduction", record)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing to do:")


def test_a_differing_rebuild_is_published_saying_what_differs(tmp_path: Path,
                                                              kit: kitdir.KitDir) -> None:
    what = ("kit/bin/ninfer: differs (embedded-path)",)
    record = write_record(kit, tmp_path / "reproduction.json", result=reproduction.DIFFERS,
                          differences=what)
    done = publish_local(tmp_path, kit, "--reproduction", record)
    assert done.returncode == 0, done.stderr
    assert "NOT reproduced: an independent rebuild on 2026-12-01" in done.stderr
    folder = tmp_path / "published" / TAG
    notes = (folder / "RELEASE.md").read_text()
    assert f"NOT reproduced: an independent rebuild on 2026-12-01 by {RUN} differs" in notes
    assert f"- {what[0]}" in notes
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert entry.reproduction is not None and entry.reproduction.result == "differs"
    document = verify_json(folder)
    assert document["reproduction"]["result"] == "differs"
    assert document["reproduction"]["differences"] == list(what)
    assert document["reproduction"]["words"].startswith("NOT reproduced")


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d.pop("run"), "key 'run' missing"),
    (lambda d: d.update(result="maybe"), "key 'result' must be one of identical, differs, "
                                         "failed, got 'maybe'"),
    (lambda d: d.update(date="yesterday"), "key 'date' must be a UTC time"),
    (lambda d: d.update(compared={"x.tar.gz": "00"}), "key 'compared' must map each tarball"),
    (lambda d: d.update(extra=1), "unknown key 'extra'"),
])
def test_a_malformed_record_is_bad_input_naming_file_and_key(
        tmp_path: Path, kit: kitdir.KitDir, edit: Any, named: str) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    data = json.loads(record.read_text())
    edit(data)
    record.write_text(json.dumps(data))
    done = publish_local(tmp_path, kit, "--reproduction", record)
    assert done.returncode == 2, done.stderr
    assert f"{record}: {named}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "published").exists() or not any(
        (tmp_path / "published").rglob("*.tar.gz"))


def test_a_record_of_another_build_is_refused(tmp_path: Path, kit: kitdir.KitDir) -> None:
    record = write_record(kit, tmp_path / "reproduction.json",
                          compared={kit.asset: "ab" * 32})
    done = publish_local(tmp_path, kit, "--reproduction", record)
    assert done.returncode == 2, done.stderr
    assert f"{record}: key 'compared' names {kit.asset} {'ab' * 32}" in done.stderr
    assert "the record is of another build" in done.stderr
    assert not (tmp_path / "releases").exists()


def test_verify_of_a_malformed_record_in_a_release_is_bad_input(tmp_path: Path,
                                                                kit: kitdir.KitDir) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    assert publish_local(tmp_path, kit, "--reproduction", record).returncode == 0
    folder = tmp_path / "published" / TAG
    broken = folder / reproduction.NAME
    data = json.loads(broken.read_text())
    data["date"] = 20261201
    broken.write_text(json.dumps(data))
    sums = (folder / kitdir.SHA256SUMS).read_text().splitlines()
    digest = subprocess.run(["sha256sum", str(broken)], capture_output=True, text=True,
                            check=True).stdout.split()[0]
    (folder / kitdir.SHA256SUMS).write_text("".join(
        f"{digest}  {reproduction.NAME}\n" if line.endswith(reproduction.NAME) else line + "\n"
        for line in sums))
    done = cli("verify", folder, "--matrix", tmp_path / "matrix.toml")
    assert done.returncode == 2, done.stderr
    assert f"{broken}: key 'date' must be one line of text" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_release_without_one_still_verifies_not_reproduced(tmp_path: Path,
                                                             kit: kitdir.KitDir) -> None:
    done = publish_local(tmp_path, kit)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "published" / TAG
    assert not (folder / reproduction.NAME).exists()
    assert "REPRODUCTION.json" not in (folder / kitdir.SHA256SUMS).read_text()
    assert "Not independently reproduced" in (folder / "RELEASE.md").read_text()
    path = tmp_path / "releases" / f"{TAG}.toml"
    assert ledger.read(path).reproduction is None and "[reproduction]" not in path.read_text()
    document = verify_json(folder)
    assert document["reproduction"] == {
        "result": "none", "words": reproduction.NOT_REPRODUCED, "date": None, "run": None,
        "summary": None, "differences": []}


# --------------------------------------------------------------------------- GitHub


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as running:
        running.add_repo("o/r")
        running.add_token(CANARY)
        yield running


def test_github_release_carries_it_and_fetch_brings_it(server: GitHubServer,
                                                      kit: kitdir.KitDir,
                                                      tmp_path: Path) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r", api=server.base_url))
    captured = Captured()
    store = github_store(server, "o/r", CANARY, captured.reporter)
    outcome = publish(kit.path, load(matrix), [store], tmp_path, captured.reporter,
                      reproduction=record)
    assert outcome.result == "published"
    release = next(r for r in server.snapshot().of("o/r") if r.tag_name == TAG and not r.draft)
    held = release.asset(reproduction.NAME)
    assert held is not None and held.data == record.read_bytes()
    sums = release.asset(kitdir.SHA256SUMS)
    assert sums is not None and f"{held.sha256}  {reproduction.NAME}\n" in sums.data.decode()
    assert f"Independently reproduced on 2026-12-01 by {RUN}" in (release.body or "")
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert entry.reproduction is not None and entry.reproduction.run == RUN

    dest = tmp_path / "box"
    fetched = cli("fetch", TAG, "--dest", dest, "--matrix", matrix)
    assert fetched.returncode in (0, 4), fetched.stderr
    assert (dest / reproduction.NAME).read_bytes() == record.read_bytes()
    shown = cli("verify", dest, "--json", "--matrix", matrix)
    assert json.loads(shown.stdout)["reproduction"]["result"] == "identical", shown.stderr


# --------------------------------------------------------------------------- repro --record


def test_repro_records_a_failed_rebuild_and_says_it_failed(tmp_path: Path,
                                                           kit: kitdir.KitDir) -> None:
    """The rebuild's failure (here: an upstream that is not there, so nothing compiles) is
    recorded as `failed`, naming the kit compared with, and repro still fails as it would."""
    record = tmp_path / "out" / reproduction.NAME
    record.parent.mkdir()
    done = cli("repro", "example", "--matrix", matrix_file(tmp_path), "--against", kit.path,
               "--record", record, "--run", RUN, "--source", tmp_path / "no-such-upstream",
               "--work", tmp_path / "work")
    assert done.returncode != 0, done.stderr
    written = reproduction.read(record)
    assert (written.result, written.kit, written.tag, written.run) == \
        ("failed", kit.kit, kit.tag, RUN)
    assert dict(written.compared) == {kit.asset: kit.sha256}
    assert "build of example failed" in written.summary
    assert written.words().startswith("NOT reproduced: the independent rebuild on ")
    # and publish takes it: the release says the rebuild failed
    assert publish_local(tmp_path, kit, "--reproduction", record).returncode == 0
    assert "failed (repro: the second build of example failed" in \
        (tmp_path / "published" / TAG / "RELEASE.md").read_text()


def test_repro_record_needs_against_and_a_run(tmp_path: Path, kit: kitdir.KitDir) -> None:
    alone = cli("repro", "example", "--matrix", matrix_file(tmp_path), "--record",
                tmp_path / "r.json", "--run", RUN)
    assert alone.returncode == 2 and "--record needs --against DIST" in alone.stderr
    env = {"GITHUB_SERVER_URL": "", "GITHUB_REPOSITORY": "", "GITHUB_RUN_ID": ""}
    nobody = cli("repro", "example", "--matrix", matrix_file(tmp_path), "--against", kit.path,
                 "--record", tmp_path / "r.json", env=env)
    assert nobody.returncode == 2 and "say who ran this reproduction with --run" in nobody.stderr
    assert not (tmp_path / "r.json").exists()


def test_what_differs_is_one_line_per_file_with_its_causes(tmp_path: Path,
                                                          program: Path) -> None:
    from ninfer_kits.commands.repro_cmd import _differences
    from ninfer_kits.repro.diff import compare
    from test_publish_support import make_kit

    one = make_kit(tmp_path / "a", program, payload=b"one")
    two = make_kit(tmp_path / "b", program, payload=b"two")
    lines = _differences(compare(one.path, two.path))
    assert lines and all(": " in line for line in lines)
    assert f"{one.asset}/kit/share/payload.bin: differs (text-lines)" in lines, lines
    assert not any(line.startswith("build.log") for line in lines)  # expected to differ
    assert _differences(compare(one.path, one.path)) == []


def test_the_ledger_table_reads_back_and_a_wrong_one_is_named(tmp_path: Path,
                                                              kit: kitdir.KitDir) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    assert publish_local(tmp_path, kit, "--reproduction", record).returncode == 0
    path = tmp_path / "releases" / f"{TAG}.toml"
    text = path.read_text()
    for old, new, said in (
            ('result = "identical"', 'result = "maybe"', "reproduction.result must be one of"),
            ('[reproduction]\n', '[reproduction]\nextra = "x"\n',
             "reproduction.extra is not a key of [reproduction]")):
        with pytest.raises(BadInput, match=re.escape(said)):
            ledger.parse(text.replace(old, new, 1), str(path))
    digest = ledger.read(path).reproduction.sha256  # type: ignore[union-attr]
    with pytest.raises(BadInput, match=r"reproduction\.sha256 is not that of an asset"):
        ledger.parse(text.replace(f'sha256 = "{digest}"\n\n[[floor]]', 'sha256 = "'
                                  + "0" * 64 + '"\n\n[[floor]]', 1), str(path))


def test_a_release_folder_published_again_keeps_its_record(tmp_path: Path,
                                                           kit: kitdir.KitDir) -> None:
    record = write_record(kit, tmp_path / "reproduction.json")
    assert publish_local(tmp_path, kit, "--reproduction", record).returncode == 0
    first = tmp_path / "published" / TAG
    done = cli("publish", first, "--matrix", tmp_path / "matrix.toml", "--out",
               tmp_path / "again", "--cache-dir", tmp_path / "cache", "--ledger-dir",
               tmp_path / "again-releases")
    assert done.returncode == 0, done.stderr
    second = tmp_path / "again" / TAG
    assert (second / reproduction.NAME).read_bytes() == record.read_bytes()
    assert (second / kitdir.SHA256SUMS).read_bytes() == (first / kitdir.SHA256SUMS).read_bytes()
    assert "Independently reproduced on 2026-12-01" in (second / "RELEASE.md").read_text()


def test_a_rebuild_published_without_a_record_keeps_the_releases_and_its_ledger(
        tmp_path: Path, kit: kitdir.KitDir) -> None:
    """A forced rebuild of a reproduced kit (its tarballs the same, no --reproduction): the
    release stays as it is, record included, and its ledger file is not written again."""
    record = write_record(kit, tmp_path / "reproduction.json")
    assert publish_local(tmp_path, kit, "--reproduction", record).returncode == 0
    folder, ledger_file = tmp_path / "published" / TAG, tmp_path / "releases" / f"{TAG}.toml"
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    recorded = ledger_file.read_bytes()
    again = publish_local(tmp_path, kit)
    assert again.returncode == 0, again.stderr
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert ledger_file.read_bytes() == recorded
    assert ledger.read(ledger_file).reproduction is not None
    assert f"keeps its own {reproduction.NAME}" in again.stderr + again.stdout
    assert "already records this release; unchanged" in again.stderr + again.stdout
