"""The publish: one finished kit folder → the same release on every store, then its ledger
entry. STAGES is the whole program in order (docs/publish.md lists what each does); nothing is
uploaded before every check that can fail has passed. Each stage takes the Outcome so far and
returns it with its own result added, as a step of the Reporter.
"""

from __future__ import annotations

from contextlib import ExitStack

from ninfer_kits.kit import kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.publish.stage_functions import (
    EACH_STORE,
    fetch_sources,
    fill_store,
    inspect_stores,
    judge_licences,
    judge_needs,
    list_release,
    lock,
    plan_release,
    preflight,
    read_kit,
    record_ledger,
    record_reproduction,
    sign_sums,
    write_index,
)
from ninfer_kits.publish.state import Outcome, PublishRequest, Stage

STAGES: tuple[tuple[str, Stage], ...] = (
    ("kit", read_kit),
    ("needs", judge_needs),
    ("licences", judge_licences),
    ("lock", lock),
    ("preflight", preflight),
    ("reproduction", record_reproduction),
    ("sources", fetch_sources),
    ("sums", list_release),
    ("sign", sign_sums),
    ("plan", plan_release),
    ("inspect", inspect_stores),
    (EACH_STORE, fill_store),
    ("ledger", record_ledger),
    ("index", write_index),
)


def _steps(name: str, request: PublishRequest) -> tuple[str, ...]:
    """The Reporter steps a stage runs as: one per store for EACH_STORE, none unwritten."""
    if name == EACH_STORE:
        return tuple(store.name for store in request.stores)
    if name == "reproduction" and request.reproduction is None:
        return ()
    if name == "sources" and not (request.kit_dir / kitdir.OWED).exists():
        return ()
    return () if name in ("ledger", "index") and request.ledger_dir is None else (name,)


def run_publish(request: PublishRequest, reporter: Reporter) -> Outcome:
    with ExitStack() as held:
        state = Outcome(request=request, held=held)
        for name, stage in STAGES:
            for step in _steps(name, request):
                with reporter.step(step):
                    state = stage(state, reporter)
        if state.kept and not state.changed_stores:
            reporter.info(f"reproduced: {state.kit.tag} is published already with this build's "
                          f"{' and '.join(state.kit.tarballs)} byte for byte; its assets are "
                          f"unchanged")
    return state
