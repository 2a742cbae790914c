"""`ninfer-kits publish`: a finished kit folder onto its stores, exactly once, verifiably.

    store.py         the Store protocol, and the Release/Asset/Found types stores speak
    plan.py          which kit folder, checked; the release it makes (assets in upload order)
    notes.py         the release notes, rendered from BUILDINFO.txt
    stages.py        the publish in order (STAGES) and its runner
    state.py         what the stages hand on: PublishRequest, Outcome
    stage_functions.py  what each stage does, with the tag's lock and the ledger entry written last
    holdings.py      what each store holds: conflicts refused up front, what it lacks uploaded
    credentials.py   the B2 key from the environment or an env file
    stores/          local (a folder; --dry-run), b2 (b2sdk), github (PyGithub)
"""
