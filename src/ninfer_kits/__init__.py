"""ninfer-kits: reproducible prebuilt Linux kits of the NInfer CUDA inference engine."""

__version__ = "0.1.0"

# Set by ninfer-kits.pyz before it runs the CLI: a module the zipapp does not carry is then its
# to name (it names the full installation), not the CLI's (which names the extra).
FROM_ZIPAPP = False
