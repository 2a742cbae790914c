"""Images in OCI registries: references, pins by digest, and moving images through the engine."""
