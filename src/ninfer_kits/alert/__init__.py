"""What the rebuild workflow tells people (docs/watch.md, "When a kit fails"): one issue per
failing kit (`alert`, issues.py) and the run's summary (`summary`, results.py)."""
