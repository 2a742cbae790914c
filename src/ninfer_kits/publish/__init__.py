"""`ninfer-kits publish`: a finished kit folder onto its stores, exactly once, verifiably
(docs/publish.md; the modules: DEVELOPING.md, "Layout"). Each store's kind is in
ninfer_kits/stores, its client in publish/stores."""
