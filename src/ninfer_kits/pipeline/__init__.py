"""The build: one matrix entry → a finished kit in dist/. `stages` lists the stages in order
(`stage_functions` does each, on `state`; `kit_rules` and `buildinfo_keys` serve them);
`builders` (local) and `docker_builder` run build/recipe.py; `source` fetches the upstream,
`pack` writes the deterministic tarball, `smoke` reads the loader's trace of a finished kit."""
