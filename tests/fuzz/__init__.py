"""Coverage-guided fuzzing of the readers of untrusted bytes (`nox -s fuzz`)."""
