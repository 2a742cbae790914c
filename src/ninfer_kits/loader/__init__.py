"""Reading a target as glibc's dynamic loader would, for verify and the portable repair alike:
`ldcache` reads /etc/ld.so.cache, `rootfs` looks up paths inside a root, `facts` gathers the
loader's setup there, `resolve` finds every library and checks every symbol version."""
