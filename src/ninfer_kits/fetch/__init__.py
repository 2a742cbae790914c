"""A published kit back: `ninfer-kits fetch` and `kit-url` (docs/fetch.md). `locate` finds the
release, `http` and `download` bring its bytes, `extract` unpacks them, `identity` binds them to
what was asked, `fetch` is the job. Standard library only, so that the .pyz runs it."""
