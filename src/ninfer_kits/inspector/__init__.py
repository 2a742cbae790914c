"""Reading ELF files: what a binary needs (elf), the CUDA device code it carries (fatbin), the
runtime floor of a set of them (floor), and files, folders and kit tarballs as one inspection
(inspection). Nothing here runs what it reads or changes anything."""
