"""ninfer-kits: reproducible prebuilt Linux kits of the NInfer CUDA inference engine."""

__version__ = "0.1.0"
