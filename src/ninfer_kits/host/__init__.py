"""This machine: the Docker engine, the build's child processes, the GPU's nvidia-smi, runtime-
library facts and version numbers."""
