"""The ledger reads through tables.Table, as the matrix and every data file do: a key of the
wrong kind is named with its file, line, table and key; a ledger inside a kit index is named as
the index names it (a URL stays a URL); and the files of every earlier writer still read."""

from __future__ import annotations

import re

import pytest

from fuzz.seeds import ledger_seeds
from ninfer_kits.errors import EXIT_BAD_INPUT, ConfigError
from ninfer_kits.release import ledger


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [data.decode("utf-8") for data in ledger_seeds().values()]


def test_every_seed_reads_and_reads_back(texts: list[str]) -> None:
    for text in texts:
        entry = ledger.parse(text, "x.toml")
        assert ledger.parse(ledger.render(entry), "y.toml") == entry


@pytest.mark.parametrize(("old", "new", "said"), [
    ('\nkit = "example"', "\nkit = 3", "x.toml:{line}: key 'kit': expected a string, got an "
                                      "integer"),
    ('location = "b2://', "location = false #", "x.toml:{line}: [stores.b2] key 'location': "
                                                "expected a string, got a boolean"),
    ('sha1 = "', "sha1 = [] #", "x.toml:{line}: [assets.1] key 'sha1': expected a string, got "
                               "an array"),
    ('requirement = "', "requirement = 1.5 #", "x.toml:{line}: [floor.1] key 'requirement': "
                                               "expected a string, got a float"),
])
def test_a_key_of_the_wrong_kind_is_named_with_its_line(texts: list[str], old: str, new: str,
                                                        said: str) -> None:
    text = texts[0].replace(old, new, 1)
    assert text != texts[0]
    line = next(number for number, row in enumerate(text.split("\n"), start=1)
                if row.startswith(new.lstrip("\n")))
    with pytest.raises(ConfigError) as caught:
        ledger.parse(text, "x.toml")
    assert str(caught.value) == said.format(line=line)
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_an_index_entrys_ledger_is_named_as_the_index_names_it(texts: list[str]) -> None:
    """kitindex.parse names each entry's ledger `<index>: kits[N].ledger`; a URL's `//` stays."""
    source = "https://example.org/o/r/raw/HEAD/releases/index.json: kits[0].ledger"
    broken = texts[0].replace('\nkit = "example"', "\nkit = 3", 1)
    with pytest.raises(ConfigError) as caught:
        ledger.parse(broken, source)
    assert str(caught.value).startswith(f"{source}:")
    assert re.fullmatch(r"[0-9]+", str(caught.value.where.line))
