"""`ninfer-kits publish`: a finished kit folder onto its stores, exactly once, verifiably.

    store.py         the Store protocol, and the Release/Asset/Found types stores speak
    plan.py          which kit folder, checked; the release it makes (assets in upload order)
    notes.py         the release notes, rendered from BUILDINFO.txt
    stages.py        the pipeline in order, the per-tag lock, conflicts refused up front
    ledger.py        releases/<tag>.toml: written last, atomically; read by fetch and kit-url
    credentials.py   the B2 key from the environment or an env file
    stores/          local (a folder; --dry-run), b2 (b2sdk), github (PyGithub)
"""
