"""The build: one matrix entry → a finished kit in dist/. docs/build.md says what it does;
DEVELOPING.md ("Layout") names the modules."""
