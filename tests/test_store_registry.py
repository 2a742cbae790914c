"""A store is one module plus one registration (issue 41): tests/toy_store.py, registered here
and nowhere else, is configured by its `[publish.toy]` table, published to by `ninfer-kits
publish` and fetched back from by `fetch --from toy`, through the commands' own code paths
(in process, where the registration is). An unknown store is still one message, exit 2."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import toy_store
from ninfer_kits import cli, stores
from ninfer_kits.errors import ConfigError
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import load_matrix
from ninfer_kits.release import ledger
from test_publish_support import ASSET, TAG, matrix_file


@pytest.fixture
def toy() -> Iterator[None]:
    stores.register(toy_store.KIND)
    yield
    stores.unregister(toy_store.NAME)


def shelf_matrix(folder: Path, root: str) -> Path:
    matrix = matrix_file(folder)  # [publish] is its last table, with no remote
    matrix.write_text(matrix.read_text() + f'\n[publish.toy]\nroot = "{root}"\n')
    return matrix


def test_a_toy_store_is_configured_published_to_and_fetched_from(
        tmp_path: Path, kit: kitdir.KitDir, toy: None) -> None:
    shelf = tmp_path / "shelf"
    matrix = shelf_matrix(tmp_path, str(shelf))
    publish_table = load_matrix(matrix).publish
    assert publish_table.targets == {"toy": toy_store.Shelf(shelf)}
    assert publish_table.remotes == ("toy",)  # so publish goes there by default

    assert cli.main(["publish", str(kit.path), "--matrix", str(matrix),
                     "--cache-dir", str(tmp_path / "cache")]) == 0
    listed = (shelf / f"{TAG}.published").read_text().split()
    assert listed[0] == ASSET and listed[-1] == kitdir.SHA256SUMS
    assert (shelf / f"{TAG}--{ASSET}").read_bytes() == kit.tarball.read_bytes()
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")  # a store users download from
    assert [store.name for store in entry.stores] == ["toy"]

    dest = tmp_path / "box"
    fetched = cli.main(["fetch", TAG, "--from", "toy", "--matrix", str(matrix), "--index",
                        "none", "--dest", str(dest)])
    assert fetched in (0, 4)  # 4: verify says it will not run here (no sm_86 GPU)
    assert (dest / ASSET).read_bytes() == kit.tarball.read_bytes()
    assert (dest / "kit" / "bin" / "ninfer").is_file()


def test_the_toy_table_is_read_by_its_store_and_unknown_without_it(tmp_path: Path,
                                                                  toy: None) -> None:
    matrix = shelf_matrix(tmp_path, "shelf")
    with pytest.raises(ConfigError, match=r"\[publish\.toy\] key 'root': must be an absolute "
                                          r"path"):
        load_matrix(matrix)
    stores.unregister(toy_store.NAME)
    with pytest.raises(ConfigError, match=r"unknown key 'toy'"):
        load_matrix(matrix)


def test_an_unknown_store_is_one_message_exit_2(tmp_path: Path, kit: kitdir.KitDir,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    matrix = matrix_file(tmp_path)
    with pytest.raises(SystemExit) as refused:
        cli.main(["publish", str(kit.path), "--matrix", str(matrix), "--to", "shelf"])
    assert refused.value.code == 2
    assert re.search(r"argument --to: invalid choice: 'shelf' \(choose from '?b2'?, "
                     r"'?github'?, '?local'?\)", capsys.readouterr().err)  # 3.13: no quotes
    assert cli.main(["fetch", TAG, "--from", "shelf", "--matrix", str(matrix)]) == 2
    assert "ninfer-kits: error: --from shelf: not github, b2 or a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        cli.main(["kit-url", TAG, "--from", "shelf", "--matrix", str(matrix)])
    assert refused.value.code == 2
    assert re.search(r"argument --from: invalid choice: 'shelf' \(choose from '?github'?, "
                     r"'?b2'?\)", capsys.readouterr().err)

    stores.register(toy_store.KIND)  # a registered store is among the names said
    try:
        assert cli.main(["fetch", TAG, "--from", "shelf", "--matrix", str(matrix)]) == 2
        assert "--from shelf: not github, b2, toy or a folder" in capsys.readouterr().err
    finally:
        stores.unregister(toy_store.NAME)
