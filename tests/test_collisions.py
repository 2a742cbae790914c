"""Two kits never get one tag: the check refuses every pair some revision can collide, and lets
through the pairs that differ in text no revision or version can fill."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ninfer_kits.matrix import (
    Kit,
    RevisionFacts,
    UnresolvedPlaceholders,
    load_matrix,
    shared_tag,
)

from tools import TOOLCHAIN_TC

TWO_UPSTREAMS = """\
schema = 1
""" + "".join(f"""
[upstreams.{name}]
repository = "owner/{name}"
url = "https://example.com/owner/{name}.git"
branch = "main"
version_file = "VERSION"
archs = ["sm_86", "sm_120a"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = {{ "eng" = "apps/eng" }}
""" for name in ("eng", "fork")) + "\n" + TOOLCHAIN_TC + "".join(f"""
[kits.{kit}]
upstream = "{upstream}"
arch = "{arch}"
toolchain = "tc"
card = "x"
tag = "{kit}-{{rev8}}"
asset = "{kit}-{{rev8}}.tar.gz"
""" for kit, upstream, arch in (("a", "eng", "sm_86"), ("b", "eng", "sm_120a"),
                                ("c", "fork", "sm_120a")))


@pytest.fixture(scope="module")
def kits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Kit]:
    path = tmp_path_factory.mktemp("collisions") / "matrix.toml"
    path.write_text(TWO_UPSTREAMS)
    return dict(load_matrix(path).kits)


def with_tag(kit: Kit, tag: str) -> Kit:
    return dataclasses.replace(kit, tag=tag)


@pytest.mark.parametrize(("first", "second", "tag_a", "tag_b", "expected"), [
    # One upstream, no arch in the tag: every revision collides.
    ("a", "b", "v{version}", "v{version}", "v0"),
    # version and version_core agree when the VERSION has no suffix.
    ("a", "b", "v{version}-x", "v{version_core}-x", "v0-x"),
    # {rev8} is the start of {rev12}.
    ("a", "b", "r{rev12}", "r{rev8}abcd", "r00000000abcd"),
    # Another upstream can reach the same commit and VERSION.
    ("a", "c", "kit-{rev8}", "kit-{rev8}", "kit-00000000"),
    # ...or a VERSION that fills what the other tag spells out.
    ("a", "c", "v{version}", "v{version}-{arch_id}", "v0-sm120a"),
    ("a", "c", "{version}-{arch_id}", "1.0-{arch_id}", None),  # sm86 vs sm120a at the end
])
def test_shared_tags(kits: dict[str, Kit], first: str, second: str, tag_a: str, tag_b: str,
                     expected: str | None) -> None:
    assert shared_tag(with_tag(kits[first], tag_a), with_tag(kits[second], tag_b)) == expected


@pytest.mark.parametrize(("tag_a", "tag_b"), [
    ("v{version}-linux-{arch_id}", "v{version}-linux-{arch_id}"),
    ("v{version}", "v{version}-{arch_id}"),  # one VERSION: never equal with one upstream
    ("x-{rev8}", "x-{rev12}"),  # 8 and 12 hex digits
    ("{rev}", "{rev8}"),
    ("eng-{version_core}", "eng-{rev8}-{arch_id}"),
    ("example-v{version_core}-linux-{arch_id}", "example-v{version_core}-linux-{arch_id}"),
])
def test_tags_that_never_meet(kits: dict[str, Kit], tag_a: str, tag_b: str) -> None:
    assert shared_tag(with_tag(kits["a"], tag_a), with_tag(kits["b"], tag_b)) is None


def test_the_production_matrix_has_no_shared_tag() -> None:
    matrix = load_matrix(Path(__file__).resolve().parents[1] / "matrix.toml")
    listed = list(matrix.kits.values())
    for i, first in enumerate(listed):
        for second in listed[i + 1:]:
            assert shared_tag(first, second) is None, (first.id, second.id)


# Soundness: whenever two kits really render one tag, the check says they can. The second
# kit's template is made from the first kit's rendered tag by turning some of the text back into
# placeholders that the second kit's facts fill with that very text, so every example collides;
# facts from small sets share digits and letters, so that the same text can come from different
# placeholders ({version} and {version_core}, {rev8} and text, {version} and {arch_id}).
PIECES = ("v", "-", "0", "1", ".", "a", "sm86", "{rev8}", "{rev12}", "{rev}", "{version}",
          "{version_core}", "{arch_id}", "{cmake_arch}")
REVISIONS = ("0" * 40, "a" * 40, "0" * 8 + "a" * 32, "0a" * 20, "a" * 12 + "1" * 28)
VERSIONS = ("0", "1", "0.1", "1.0", "0-1", "0.1-a", "1-sm86", "a", "a0", "0a", "1.0-0")
ABSTRACTED = ("rev", "rev12", "rev8", "version", "version_core", "arch_id", "cmake_arch")


def rendered(kit: Kit, revision: str, version: str) -> str | None:
    try:
        return kit.render_tag(RevisionFacts(revision=revision, version=version))
    except UnresolvedPlaceholders:  # e.g. {version_core} of a VERSION with no number
        return None


@st.composite
def colliding_pairs(draw: st.DrawFn, kits: dict[str, Kit]) -> tuple[Kit, Kit, str]:
    first = with_tag(kits["a"], draw(st.lists(st.sampled_from(PIECES), min_size=1,
                                              max_size=5).map("".join)))
    other_upstream = draw(st.booleans())
    second = kits["c" if other_upstream else "b"]
    facts_a = (draw(st.sampled_from(REVISIONS)), draw(st.sampled_from(VERSIONS)))
    facts_b = facts_a  # one upstream: one revision, one VERSION
    if other_upstream:
        facts_b = (draw(st.sampled_from(REVISIONS)), draw(st.sampled_from(VERSIONS)))
    tag = rendered(first, *facts_a)
    assume(tag is not None)
    assert tag is not None
    values = second.values(RevisionFacts(revision=facts_b[0], version=facts_b[1]))
    template, at = "", 0
    while at < len(tag):
        fits = [name for name in ABSTRACTED if values[name] and tag.startswith(values[name], at)]
        name = draw(st.sampled_from([None, *fits])) if fits else None
        if name is None:
            template, at = template + tag[at], at + 1
        else:
            template, at = template + "{" + name + "}", at + len(values[name] or "")
    second = with_tag(second, template)
    assert rendered(second, *facts_b) == tag
    return first, second, tag


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_tag_two_kits_can_render_is_always_found(kits: dict[str, Kit], data: st.DataObject
                                                   ) -> None:
    first, second, tag = data.draw(colliding_pairs(kits))
    assert shared_tag(first, second) is not None, (first.tag, second.tag, tag)
