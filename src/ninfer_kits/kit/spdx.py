"""SPDX 2.3 licence expressions, read, checked and written in one form so the same licences
always read the same. Syntax only; operators upper case, so Debian's "GPL-2+ or MIT" is never
taken for one."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ninfer_kits.errors import BadInput

_TOKEN = re.compile(r"\s*(?:(?P<open>\()|(?P<close>\))|(?P<word>[A-Za-z0-9.+:-]+))")
_ID = re.compile(r"(?:DocumentRef-[A-Za-z0-9.-]+:)?[A-Za-z0-9][A-Za-z0-9.-]*\+?")
OPERATORS = ("AND", "OR", "WITH")
REF_PREFIX = "LicenseRef-"


class NotAnExpression(BadInput):
    """A string that is not an SPDX licence expression; the message says where it breaks."""


@dataclass(frozen=True)
class Licence:
    """One licence id, with the exception its WITH adds."""

    id: str
    exception: str = ""

    def render(self) -> str:
        return f"{self.id} WITH {self.exception}" if self.exception else self.id


@dataclass(frozen=True)
class Compound:
    """`AND` (every one applies) or `OR` (the distributor picks one) of two or more terms."""

    operator: str
    terms: tuple[Expression, ...]

    def render(self) -> str:
        return f" {self.operator} ".join(
            f"({term.render()})" if isinstance(term, Compound) else term.render()
            for term in self.terms)


Expression = Licence | Compound


def parse(text: str) -> Expression:
    """`text` flattened, repeated terms dropped; NotAnExpression says what and where."""
    tokens = _tokens(text)
    parser = _Parser(text, tokens)
    expression = parser.disjunction()
    if parser.position != len(tokens):
        raise parser.fail("an operator")
    return expression


def normalise(text: str) -> str:
    return parse(text).render()


def is_expression(text: str) -> bool:
    try:
        parse(text)
    except NotAnExpression:
        return False
    return True


def all_of(expressions: Iterable[str]) -> str:
    """The AND of `expressions`, each term once, sorted (a package of many parts: CCCL)."""
    terms = [parse(text) for text in expressions]
    if not terms:
        raise NotAnExpression("no licence to combine")
    return _joined("AND", terms).render()


def is_single_listed_id(expression: Expression) -> bool:
    """One licence of the SPDX list, no exception and no LicenseRef: CycloneDX's `license.id`."""
    return isinstance(expression, Licence) and not expression.exception and \
        "Ref-" not in expression.id


def licences(expression: Expression) -> tuple[Licence, ...]:
    if isinstance(expression, Licence):
        return (expression,)
    return tuple(item for term in expression.terms for item in licences(term))


def _joined(operator: str, terms: list[Expression]) -> Expression:
    flat: dict[str, Expression] = {}
    for term in terms:
        parts = term.terms if isinstance(term, Compound) and term.operator == operator else (term,)
        for part in parts:
            flat.setdefault(part.render(), part)
    if len(flat) == 1:
        return next(iter(flat.values()))
    return Compound(operator, tuple(flat[key] for key in sorted(flat)))


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None:
            raise NotAnExpression(f"{text!r} is not an SPDX licence expression: "
                                  f"{text[position:].strip()[:1]!r} at character {position + 1}")
        tokens.append(match.group(match.lastgroup or "word"))
        position = match.end()
    if not tokens:
        raise NotAnExpression("an empty licence expression")
    return tokens


class _Parser:
    """Recursive descent over the tokens: OR binds loosest, then AND, then WITH."""

    def __init__(self, text: str, tokens: list[str]) -> None:
        self.text, self.tokens, self.position = text, tokens, 0

    def fail(self, wanted: str) -> NotAnExpression:
        found = self.tokens[self.position] if self.position < len(self.tokens) else "its end"
        return NotAnExpression(f"{self.text!r} is not an SPDX licence expression: {wanted} "
                               f"expected, found {found!r}")

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def disjunction(self) -> Expression:
        terms = [self.conjunction()]
        while self.peek() == "OR":
            self.take()
            terms.append(self.conjunction())
        return terms[0] if len(terms) == 1 else _joined("OR", terms)

    def conjunction(self) -> Expression:
        terms = [self.term()]
        while self.peek() == "AND":
            self.take()
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else _joined("AND", terms)

    def term(self) -> Expression:
        if self.peek() == "(":
            self.take()
            inner = self.disjunction()
            if self.peek() != ")":
                raise self.fail("')'")
            self.take()
            return inner
        licence = self.identifier()
        if self.peek() != "WITH":
            return Licence(licence)
        self.take()
        return Licence(licence, self.identifier())

    def identifier(self) -> str:
        token = self.peek()
        if token is None or token in OPERATORS or token in "()" or not _ID.fullmatch(token):
            raise self.fail("a licence id")
        return self.take()
