"""BUILDINFO.txt: one key per line, written and read back; what would break a line is refused."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ninfer_kits.errors import EXIT_BAD_INPUT, BadInput
from ninfer_kits.kit import buildinfo
from ninfer_kits.kit.buildinfo import BuildInfo

SHA = "0123456789abcdef" * 4
BASE_ID = "sha256:" + "e" * 64


def sample() -> BuildInfo:
    return BuildInfo(
        kit="example", card="RTX 3090", upstream="owner/eng", upstream_url="https://h/x.git",
        tracked_ref="main", revision="a" * 40, version="0.3.0", arch="sm_86",
        cuda_version="13.0.88", host_compiler="GNU 12.2.0", cmake_version="3.31.6",
        cmake_options="-DCMAKE_BUILD_TYPE=Release", builder="local", toolchain="tc",
        base_image="none (built on the host)", source_date_epoch=1735689600,
        pipeline_version="0.1.0",
        recipe="c" * 64, python_version="3.11.7", zlib_version="1.2.13",
        glibc_floor="2.34", sonames="libc.so.6", runpath="none", sass="sm_86", ptx="none",
        symbol_floors=("GLIBC_2.34", "GLIBCXX_3.4.29"),
        floor=(("x86-64 Linux, glibc ≥ 2.34", "highest versioned symbol is GLIBC_2.34"),),
        binaries=((SHA, "kit/bin/ninfer"), (SHA, "kit/bin/ninfer-serve")),
        licenses=("kit/LICENSE", "kit/NOTICE"),
        run=(("jobs", "2"), ("pipeline_revision", f"{'b' * 40}-dirty"),
             ("pipeline_changes", "README.md, src/x.py"), ("base_image_digest", BASE_ID)),
    )


def test_render_and_parse_round_trip_with_the_repeated_keys() -> None:
    info = sample()
    text = buildinfo.render(info)
    assert text.count("\nsymbol_floor: ") == 2 and text.count("\nsha256: ") == 2
    assert f"pipeline_version: 0.1.0\nrecipe: {'c' * 64}\npython_version: 3.11.7\n" in text
    assert "python_version: 3.11.7\nzlib_version: 1.2.13\n" in text
    assert buildinfo.parse(text) == info


def test_the_pipeline_checkout_is_a_run_key_and_the_recipe_an_input() -> None:
    """The kit's own copy (above the marker) names what its bytes depend on: the ninfer-kits
    version and the recipe's sha256, not the checkout's commit or whether it was dirty; the
    copy beside the tarball has the commit and the changes below the marker."""
    info = sample()
    inside = buildinfo.render(info, with_run=False)
    assert "pipeline_revision" not in inside and "pipeline_changes" not in inside
    assert "b" * 40 not in inside and f"\nrecipe: {'c' * 64}\n" in inside
    beside = buildinfo.render(info)
    above, below = beside.split(buildinfo.RUN_MARKER)
    assert above == inside
    assert f"\nrun.pipeline_revision: {'b' * 40}-dirty\n" in below
    assert buildinfo.parse(beside).pipeline_commit == f"{'b' * 40}-dirty"
    assert buildinfo.parse(inside).pipeline_commit == "unknown"
    # Another checkout commit, dirty or not, leaves the kit's copy as it was.
    other = dataclasses.replace(info, run=(("jobs", "2"), ("pipeline_revision", "d" * 40)))
    assert buildinfo.render(other, with_run=False) == inside


def test_the_base_images_id_on_the_engine_is_a_run_key() -> None:
    """Two engines that each make the same base image (two hosted runners) give it two IDs and
    the kit the same compilers: the kit's own copy names the base image, not its ID, which the
    copy beside the tarball has below the marker. Older kits carry it above; they still read."""
    info = sample()
    inside = buildinfo.render(info, with_run=False)
    assert "base_image_digest" not in inside and "e" * 64 not in inside
    another = ("base_image_digest", "sha256:" + "f" * 64)
    other = dataclasses.replace(info, run=(*info.run[:-1], another))
    assert buildinfo.render(other, with_run=False) == inside
    beside = buildinfo.render(info)
    assert f"\nrun.base_image_digest: {BASE_ID}\n" in beside.split(buildinfo.RUN_MARKER)[1]
    assert buildinfo.parse(beside).base_image_id == BASE_ID
    assert buildinfo.parse(inside).base_image_id == "unknown"
    older = inside.replace("\nsource_date_epoch:",
                           f"\nbase_image_digest: {BASE_ID}\nsource_date_epoch:")
    assert buildinfo.parse(older).base_image_id == BASE_ID
    assert buildinfo.render(buildinfo.parse(older), with_run=False) == older


def test_a_kit_from_before_the_recipe_key_still_reads_with_its_pipeline_revision() -> None:
    """Older kits have `pipeline_revision` above the marker and no `recipe`: they read, name
    their commit, and render back to the same text."""
    new = buildinfo.render(sample(), with_run=False)
    older = new.replace(f"recipe: {'c' * 64}\n", f"pipeline_revision: {'b' * 40}-dirty\n")
    info = buildinfo.parse(older)
    assert (info.recipe, info.pipeline_revision) == ("unknown", f"{'b' * 40}-dirty")
    assert info.pipeline_commit == f"{'b' * 40}-dirty"
    assert buildinfo.render(info, with_run=False) == older


@pytest.mark.parametrize("value", ["c" * 63, "C" * 64, "sha256:" + "c" * 64, ""])
def test_a_recipe_that_is_not_a_sha256_is_refused(value: str) -> None:
    with pytest.raises(BadInput, match=r"recipe .* is neither a sha256 hex digest"):
        buildinfo.render(dataclasses.replace(sample(), recipe=value))
    text = buildinfo.render(sample()).replace(f"recipe: {'c' * 64}", f"recipe: {value}")
    with pytest.raises(BadInput, match=r"recipe .* is neither a sha256 hex digest"):
        buildinfo.parse(text)


def test_an_older_file_without_the_newer_keys_still_reads() -> None:
    text = buildinfo.render(sample())
    older = "".join(line for line in text.splitlines(keepends=True)
                    if not line.startswith(("python_version:", "zlib_version:")))
    info = buildinfo.parse(older)
    assert (info.python_version, info.zlib_version) == ("unknown", "unknown")


@pytest.mark.parametrize(("field", "value", "key", "shown"), [
    ("card", "RTX\n3090", "card", "a line feed (U+000A)"),
    ("card", "RTX 3090\r", "card", "a carriage return (U+000D)"),
    ("version", "0.3\x1b[31m", "version", "an escape (U+001B)"),
    ("upstream_url", "https://h/x\tgit", "upstream_url", "a tab (U+0009)"),
    ("cmake_options", "-DA=1\u2028-DB=2", "cmake_options", "line separator (U+2028)"),
    ("card", "RTX\x0b3090", "card", "a control character (U+000B)"),
    ("card", "RTX\x853090", "card", "a control character (U+0085)"),
])
def test_a_value_that_would_break_its_line_is_refused_when_writing(
        field: str, value: str, key: str, shown: str) -> None:
    info = dataclasses.replace(sample(), **{field: value})  # type: ignore[arg-type]
    line = buildinfo.SCALARS.index(key) + 2  # the header is line 1
    with pytest.raises(BadInput) as caught:
        buildinfo.render(info)
    assert str(caught.value).startswith(f"BUILDINFO.txt line {line}, key '{key}': holds {shown}")
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_run_values_and_repeated_values_are_checked_too() -> None:
    with pytest.raises(BadInput, match=r"key 'run.gpu': holds a line feed"):
        buildinfo.render(dataclasses.replace(sample(), run=(("gpu", "A\nB"),)))
    with pytest.raises(BadInput, match=r"key 'license': holds a carriage return"):
        buildinfo.render(dataclasses.replace(sample(), licenses=("kit/LICENSE\r",)))
    with pytest.raises(BadInput, match=r"key 'run.jobs': repeated \(first on line \d+\)"):
        buildinfo.render(dataclasses.replace(sample(), run=(("jobs", "1"), ("jobs", "2"))))
    with pytest.raises(BadInput, match="not a run key"):
        buildinfo.render(dataclasses.replace(sample(), run=(("Jobs: x", "1"),)))
    with pytest.raises(BadInput, match=r"requirement 'a \| b' holds '\|'"):
        buildinfo.render(dataclasses.replace(sample(), floor=(("a | b", "why"),)))


def _lines() -> list[str]:
    return buildinfo.render(sample()).splitlines()


def _with(line: str, at: int) -> str:
    lines = _lines()
    lines.insert(at, line)
    return "\n".join(lines) + "\n"


def test_a_repeated_key_is_refused_when_reading_naming_both_lines() -> None:
    card = next(number for number, line in enumerate(_lines(), start=1)
                if line.startswith("card: "))
    with pytest.raises(BadInput) as caught:
        buildinfo.parse(_with("card: RTX 5090", 10), "dist/x/BUILDINFO.txt")
    assert str(caught.value) == (
        f"dist/x/BUILDINFO.txt:11: key 'card': repeated (first on line {card}); only "
        "symbol_floor, floor, sha256, license, bundled may appear more than once")
    with pytest.raises(BadInput, match=r":\d+: key 'run.jobs': repeated"):
        buildinfo.parse(_with("run.jobs: 9", len(_lines())))
    # the documented repeated keys may repeat
    assert len(buildinfo.parse(_with("license: kit/COPYING", 10)).licenses) == 3


@pytest.mark.parametrize(("raw", "shown"), [
    ("card: RTX\r3090", "a carriage return (U+000D)"),
    ("card: RTX\x0c3090", "a control character (U+000C)"),  # splitlines() would split here
    ("card: RTX\u20293090", "paragraph separator (U+2029)"),
    ("card: RTX\x003090", "a nul byte (U+0000)"),
])
def test_a_control_character_is_refused_when_reading(raw: str, shown: str) -> None:
    text = "\n".join(line if not line.startswith("card: ") else raw for line in _lines()) + "\n"
    number = next(n for n, line in enumerate(_lines(), start=1) if line.startswith("card: "))
    with pytest.raises(BadInput, match=re.escape(f"BUILDINFO.txt:{number}: key 'card': holds "
                                                 f"{shown} at column 10")):
        buildinfo.parse(text)


def test_the_parser_names_the_bad_line() -> None:
    with pytest.raises(BadInput, match=r"BUILDINFO.txt:3: expected 'key: value'"):
        buildinfo.parse("# comment\nformat: 1\nno separator here\n")
    with pytest.raises(BadInput, match="missing keys"):
        buildinfo.parse("format: 1\n")


# --------------------------------------------------------------------------- portable kits

LIBSTDCXX = ("libstdc++.so.6", "ab" * 32, "libstdc++6 14.2.0-19 (dpkg)",
             "GPL-3.0-or-later WITH GCC-exception-3.1",
             "kit/third_party/libstdc++6/copyright")
LIBCURL = ("libcurl.so.4", "cd" * 32, "libcurl4t64 8.14.1-2 (dpkg)", "curl",
           "kit/third_party/libcurl4t64/copyright")
NVRTC = ("libnvrtc.so.13", "ef" * 32, "nvidia-cuda-nvrtc 13.0.88 (wheel)",
         "LicenseRef-NVIDIA-CUDA-EULA", "kit/third_party/nvidia-cuda-nvrtc/LICENSE.txt")


def portable_sample() -> BuildInfo:
    return dataclasses.replace(sample(), flavour="portable",
                               bundled=(LIBSTDCXX, LIBCURL, NVRTC))


def test_the_portable_keys_round_trip_after_the_older_scalars() -> None:
    plain = dataclasses.replace(
        sample(), flavour_assets=(("portable", "ninfer-example-kit-v0.3.0-sm86-portable.tar.gz"),))
    text = buildinfo.render(plain)
    # flavour: plain is the default, left out so that older readers still read the file
    assert ("relocatable_device_code: none\n"
            "portable_asset: ninfer-example-kit-v0.3.0-sm86-portable.tar.gz\n"
            "symbol_floor: ") in text
    assert buildinfo.parse(text) == plain and "bundled:" not in text
    assert "flavour:" not in buildinfo.render(sample())
    assert "portable_asset:" not in buildinfo.render(sample())
    inner = portable_sample()
    text = buildinfo.render(inner, with_run=False)
    assert "\nflavour: portable\nsymbol_floor: " in text
    assert text.count("\nbundled: ") == 3
    assert ("\nbundled: libstdc++.so.6 | " + "ab" * 32 + " | libstdc++6 14.2.0-19 (dpkg) | "
            "GPL-3.0-or-later WITH GCC-exception-3.1 | kit/third_party/libstdc++6/copyright\n"
            ) in text
    assert text.index("\nlicense: ") < text.index("\nbundled: ")  # after the licenses
    parsed = buildinfo.parse(text)
    assert parsed == dataclasses.replace(inner, run=())
    assert parsed.bundled[2] == NVRTC and all(len(row) == 5 for row in parsed.bundled)
    assert buildinfo.BUNDLED_ORIGIN.fullmatch(parsed.bundled[2][2]).group(  # type: ignore[union-attr]
        "package", "version", "manager") == ("nvidia-cuda-nvrtc", "13.0.88", "wheel")
    assert buildinfo.bundled_origin("libstdc++6", "14.2.0-19", "dpkg") == LIBSTDCXX[2]


def test_a_file_from_before_portable_kits_still_reads() -> None:
    """Written before flavour, portable_asset and bundled existed: the defaults."""
    text = buildinfo.render(sample())
    older = "".join(line for line in text.splitlines(keepends=True)
                    if not line.startswith(("flavour:", "portable_asset:")))
    assert "flavour" not in older and "bundled" not in older
    info = buildinfo.parse(older)
    assert (info.flavour, info.asset_of("portable"), info.bundled) == ("plain", None, ())
    assert info == sample()


@pytest.mark.parametrize(("row", "words"), [
    (("libx.so.1", "ab" * 32, "libx1 1.0 (dpkg)", "MIT | BSD", "kit/third_party/x"),
     "the license 'MIT | BSD' is empty, holds '|'"),
    (("libx.so.1", "ab" * 32, "libx1 1.0 (dpkg)", "", "kit/third_party/x"),
     "the license '' is empty"),
    (("libx.so.1", "AB" * 32, "libx1 1.0 (dpkg)", "MIT", "kit/third_party/x"),
     "is not a sha256 hex digest"),
    (("libx.so.1", "ab" * 32, "libx1 1.0 (rpm)", "MIT", "kit/third_party/x"),
     "the origin 'libx1 1.0 (rpm)' is not '<package> <version> (dpkg|wheel|built)'"),
    (("libx.so.1", "ab" * 32, "libx1 1.0", "MIT", "kit/third_party/x"),
     "is not '<package> <version> (dpkg|wheel|built)'"),
    (("libx.so.1", "ab" * 32, "libx1 1.0 (dpkg)", "MIT"), "4 fields, not 5"),
])
def test_a_bundled_row_that_would_not_read_back_is_refused_when_writing(
        row: tuple[str, ...], words: str) -> None:
    info = dataclasses.replace(sample(), bundled=(row,))  # type: ignore[arg-type]
    with pytest.raises(BadInput, match=re.escape(words)):
        buildinfo.render(info)


def test_a_bundled_line_with_a_control_character_is_refused_naming_its_line() -> None:
    row = (*LIBSTDCXX[:4], "kit/third_party/x\ty")
    info = dataclasses.replace(sample(), bundled=(row,))  # type: ignore[arg-type]
    with pytest.raises(BadInput, match=r"line \d+, key 'bundled': holds a tab"):
        buildinfo.render(info)


@pytest.mark.parametrize(("line", "words"), [
    ("bundled: libx.so.1 | " + "ab" * 32 + " | libx1 1.0 (dpkg) | MIT", "(4 fields)"),
    ("bundled: libx.so.1 | " + "ab" * 32 + " | libx1 1.0 (dpkg) | MIT | a | b", "(6 fields)"),
    ("bundled: libx.so.1 | abc | libx1 1.0 (dpkg) | MIT | kit/x", "not a sha256 hex digest"),
    ("bundled: libx.so.1 | " + "ab" * 32 + " | libx1 (dpkg) | MIT | kit/x",
     "is not '<package> <version> (dpkg|wheel|built)'"),
    ("flavour: fat", "flavour 'fat' is not one of plain, portable"),
    ("portable_asset: kit.tar.gz", "portable_asset 'kit.tar.gz' is neither 'none' nor"),
])
def test_malformed_portable_lines_are_refused_when_reading(line: str, words: str) -> None:
    lines = [kept for kept in _lines() if not kept.startswith(line.partition(":")[0] + ":")]
    lines.insert(5, line)
    with pytest.raises(BadInput, match=re.escape(words)):
        buildinfo.parse("\n".join(lines) + "\n", "dist/x/BUILDINFO.txt")


def test_flavour_and_portable_asset_are_checked_when_writing() -> None:
    with pytest.raises(BadInput, match="flavour 'fat' is not one of plain, portable"):
        buildinfo.render(dataclasses.replace(sample(), flavour="fat"))
    with pytest.raises(BadInput, match=r"portable_asset 'x/y-portable\.tar\.gz' is neither"):
        buildinfo.render(dataclasses.replace(
            sample(), flavour_assets=(("portable", "x/y-portable.tar.gz"),)))
    twice = _with("flavour: plain", 3).replace("format: 1\n", "format: 1\nflavour: plain\n")
    with pytest.raises(BadInput, match=r"key 'flavour': repeated"):
        buildinfo.parse(twice)
