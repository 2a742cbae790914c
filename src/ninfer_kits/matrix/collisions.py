"""No two kits may get the same release tag (so one release and one dist/<tag>/ folder), for ANY
revision and version, not only the pinned ones: the pins move and `--revision` builds another.
Each tag template becomes a pattern whose facts ({rev8}, {version}, …) are holes matching what
the fact can be, and two collide when some string matches both (their automata's product,
searched breadth first). Holes of one fact of one upstream cancel at both ends (`v{version}`
never equals `v{version}-sm89`); the rest are taken as independent, which can only over-report."""

from __future__ import annotations

import string
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ninfer_kits.config.tables import Table, quote
from ninfer_kits.matrix.model import Kit, template_placeholders

_HEX = frozenset("0123456789abcdef")
_DIGITS = frozenset(string.digits)
_ALNUM = frozenset(string.ascii_letters + string.digits)
_VERSION_CHARS = _ALNUM | frozenset(".+_-")
_ARCH_PLACEHOLDERS = frozenset({"arch", "arch_id", "cmake_arch", "kit"})
_UPSTREAM_PLACEHOLDERS = frozenset({"upstream", "kit"})


@dataclass(frozen=True)
class Hole:
    """A part of a name that depends on the revision: the fact `name` (one value for all kits
    of `upstream`), and the automaton of what it can be (`edges[state]`: (characters, next))."""

    name: str
    upstream: str
    edges: tuple[tuple[tuple[frozenset[str], int], ...], ...]
    accept: frozenset[int]


def _fixed(count: int, chars: frozenset[str]) -> tuple[tuple[tuple[frozenset[str], int], ...], ...]:
    return (*(((chars, i + 1),) for i in range(count)), ())


# The holes each placeholder is made of. A SHA is split at 8 and 12 so that {rev8} is the start
# of {rev12}, and {rev12} the start of {rev}.
_SHAPES: Mapping[str, tuple[tuple[tuple[tuple[frozenset[str], int], ...], ...], frozenset[int]]] = {
    "rev[0:8]": (_fixed(8, _HEX), frozenset({8})),
    "rev[8:12]": (_fixed(4, _HEX), frozenset({4})),
    "rev[12:40]": (_fixed(28, _HEX), frozenset({28})),
    # [0-9A-Za-z][0-9A-Za-z.+_-]*, the versions the build accepts
    "version": ((((_ALNUM, 1),), ((_VERSION_CHARS, 1),)), frozenset({1})),
    # [0-9]+(\.[0-9]+)*
    "version_core": ((((_DIGITS, 1),), ((_DIGITS, 1), (frozenset("."), 2)), ((_DIGITS, 1),)),
                     frozenset({1})),
}
_FACTS: Mapping[str, tuple[str, ...]] = {
    "rev8": ("rev[0:8]",),
    "rev12": ("rev[0:8]", "rev[8:12]"),
    "rev": ("rev[0:8]", "rev[8:12]", "rev[12:40]"),
    "version": ("version",),
    "version_core": ("version_core",),
}

Token = str | Hole  # one literal character, or a hole


def pattern(kit: Kit, template: str) -> tuple[Token, ...]:
    """The template with the values the matrix fixes filled in and the facts left as holes."""
    known = {name: value for name, value in kit.values().items()
             if name not in _FACTS and value is not None}
    tokens: list[Token] = []
    literal = template
    for name in template_placeholders(template):
        before, _, literal = literal.partition("{" + name + "}")
        tokens.extend(before)
        if name in known:
            tokens.extend(known[name])
        else:
            for part in _FACTS[name]:
                edges, accept = _SHAPES[part]
                tokens.append(Hole(part, kit.upstream.id, edges, accept))
    tokens.extend(literal)
    return tuple(tokens)


def _cancel(a: Sequence[Token], b: Sequence[Token]) -> tuple[int, int]:
    """How many tokens both start and end with (equal characters, or holes of one fact)."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return start, end


def _sample(tokens: Sequence[Token]) -> str:
    """One string the tokens match (the lowest character on the shortest path)."""
    text = []
    for token in tokens:
        if isinstance(token, str):
            text.append(token)
            continue
        state = 0
        while state not in token.accept:
            chars, state = token.edges[state][0]
            text.append(min(chars))
    return "".join(text)


_State = tuple[int, int]  # (token index, state inside a hole token)


def _moves(tokens: Sequence[Token], state: _State) -> list[tuple[frozenset[str], _State]]:
    index, inner = state
    if index == len(tokens):
        return []
    token = tokens[index]
    if isinstance(token, str):
        return [(frozenset(token), (index + 1, 0))]
    return [(chars, (index, target)) for chars, target in token.edges[inner]]


def _closure(tokens: Sequence[Token], state: _State) -> list[_State]:
    """The state and those reached without reading (past a hole that may end here)."""
    states = [state]
    while state[0] < len(tokens):
        token = tokens[state[0]]
        if isinstance(token, str) or state[1] not in token.accept:
            break
        state = (state[0] + 1, 0)
        states.append(state)
    return states


def common_string(a: Sequence[Token], b: Sequence[Token]) -> str | None:
    """A string both patterns match (the shortest, lowest characters first), or None."""
    start = [(x, y) for x in _closure(a, (0, 0)) for y in _closure(b, (0, 0))]
    parent: dict[tuple[_State, _State], tuple[tuple[_State, _State], str] | None] = dict.fromkeys(
        start)
    queue = deque(start)
    while queue:
        pair = queue.popleft()
        if pair == ((len(a), 0), (len(b), 0)):
            text = []
            step = parent[pair]
            while step is not None:
                pair, char = step
                text.append(char)
                step = parent[pair]
            return "".join(reversed(text))
        for chars_a, next_a in _moves(a, pair[0]):
            for chars_b, next_b in _moves(b, pair[1]):
                both = chars_a & chars_b
                if not both:
                    continue
                for x in _closure(a, next_a):
                    for y in _closure(b, next_b):
                        if (x, y) not in parent:
                            parent[(x, y)] = (pair, min(both))
                            queue.append((x, y))
    return None


def shared_tag(first: Kit, second: Kit) -> str | None:
    """A tag both kits can get (see the module's docstring), or None when none exists."""
    a, b = pattern(first, first.tag), pattern(second, second.tag)
    start, end = _cancel(a, b)
    middle = common_string(a[start:len(a) - end], b[start:len(b) - end])
    if middle is None:
        return None
    return _sample(a[:start]) + middle + _sample(a[len(a) - end:])


def _hint(first: Kit, second: Kit) -> str:
    names = set(template_placeholders(first.tag)) | set(template_placeholders(second.tag))
    if first.arch != second.arch and not names & _ARCH_PLACEHOLDERS:
        return "; put {arch_id} in the tags"
    if first.upstream.id != second.upstream.id and not names & _UPSTREAM_PLACEHOLDERS:
        return "; put {upstream}, or text of each kit's own, in the tags"
    return "; make the tags differ in text that no revision or version can fill"


def check_collisions(section: Table, kits: Mapping[str, Kit]) -> None:
    """ConfigError at the later kit's tag when two kits can get the same tag."""
    seen: list[Kit] = []
    for kit in kits.values():
        for earlier in seen:
            tag = shared_tag(earlier, kit)
            if tag is None:
                continue
            facts = (f"one revision of upstream '{kit.upstream.id}'"
                     if earlier.upstream.id == kit.upstream.id else
                     f"revisions of upstreams '{earlier.upstream.id}' and '{kit.upstream.id}'")
            raise section.table(kit.id).error("tag", (
                f"kit '{kit.id}' and kit '{earlier.id}' can get the same tag, e.g. {quote(tag)} "
                f"(from {facts}): both would be published as one release "
                f"and built into one dist/<tag>/ folder{_hint(earlier, kit)}"
            ))
        seen.append(kit)
