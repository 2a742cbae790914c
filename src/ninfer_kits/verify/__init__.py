"""Verifying a kit's runtime floor on a target (this host, a root folder, a Docker image) as the
dynamic loader (ninfer_kits.loader) and the CUDA driver would, and saying how to fix what fails."""
