"""Verifying a kit's runtime floor on a target (this host, a root folder, a Docker image) as the
dynamic loader and the CUDA driver would: `ldcache` and `ldconf` read the target's loader
configuration, `rootfs` looks up paths inside a target, `resolve` finds every library and checks
every symbol version the way ld.so does."""
