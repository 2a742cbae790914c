"""The flavours of a kit, the plain kit first: a flavour is one entry of KINDS and nothing else
(docs/build.md, "Flavours"). Standard library only: the file formats read it."""

from __future__ import annotations

from dataclasses import dataclass

PLAIN = "plain"  # the compile as it is: BUILDINFO's `flavour` of the kit's own tarball
TARBALL_SUFFIX = ".tar.gz"


@dataclass(frozen=True, kw_only=True)
class FlavourKind:
    """A flavour the build can make beside the plain kit, from the same compile."""

    name: str  # BUILDINFO's `flavour` in its own BUILDINFO.txt; `fetch --flavour NAME`
    suffix: str  # its tarball: <the plain tarball's stem><suffix>
    purpose: str
    # "module:function" (a pipeline.state.FlavourMaker): the file formats import no pipeline
    make: str
    # the matrix kit's switch (`portable = true`); None: every kit has it
    switch: str | None = None
    option: str = ""  # fetch's and kit-url's option for it; "" is `--flavour NAME`

    @property
    def key(self) -> str:
        """The plain kit's BUILDINFO key, and the ledger's prefix, that name its tarball."""
        return f"{self.name}_asset"

    @property
    def fetch_option(self) -> tuple[str, ...]:
        return (self.option,) if self.option else ("--flavour", self.name)

    def asset(self, plain: str) -> str:
        if not plain.endswith(TARBALL_SUFFIX) or plain == TARBALL_SUFFIX:
            raise ValueError(f"{plain!r} is not a kit tarball's name (<stem>{TARBALL_SUFFIX})")
        return plain.removesuffix(TARBALL_SUFFIX) + self.suffix

    def built_for(self, kit: object) -> bool:
        """Whether the matrix kit `kit` (matrix.Kit) is built with this flavour."""
        return self.switch is None or getattr(kit, self.switch) is True


PORTABLE = FlavourKind(
    name="portable", suffix="-portable.tar.gz",
    purpose="the same build carrying its own libraries (`kit/lib/`, their copyright files in "
            "`kit/third_party/`): a machine needs only glibc and the NVIDIA driver (its own "
            "`kit/BUILDINFO.txt` has the exact floor)",
    make="ninfer_kits.pipeline.stage_functions:repair_portable", switch="portable",
    option="--portable")

# In fetch --auto's order: the plain kit where the machine can run it, else the first that runs.
KINDS: tuple[FlavourKind, ...] = (PORTABLE,)


def beside() -> tuple[FlavourKind, ...]:
    """The flavours beside the plain kit (read at each call: a test may add one)."""
    return KINDS


def names() -> tuple[str, ...]:
    return (PLAIN, *(kind.name for kind in KINDS))


def named(name: str) -> FlavourKind | None:
    """The flavour `name` beside the plain kit; None for the plain kit or an unknown name."""
    return next((kind for kind in KINDS if kind.name == name), None)


def rank(name: str) -> int:
    """Where flavour `name` stands in the list (fetch --auto's order); unknown ones last."""
    order = names()
    return order.index(name) if name in order else len(order)
