"""What tomllib makes of data/runtime_facts.toml, and the text it made it from: written
by `python -m ninfer_kits.runtime_facts` (runtime_facts.py says why); do not edit."""

# ruff: noqa: E501
from __future__ import annotations

from ninfer_kits.records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

TEXT = '# Facts about runtime libraries that turn a symbol version or a soname into advice for users.\n# Validated on load (ninfer_kits.runtime_facts): every version key must be a dotted number.\nschema = 1\n\n# Sonames that glibc itself provides: they are covered by the glibc row of the floor.\n# Source: glibc\'s `shlib-versions` (libc=6, libm=6, libdl=2, libpthread=0, librt=1, libutil=1,\n# libresolv=2, libanl=1, libnsl=1, libBrokenLocale=1, libthread_db=1, libnss_*=2, libmvec=1,\n# libc_malloc_debug=0) and the per-architecture `sysdeps/unix/sysv/linux/*/shlib-versions` for the\n# loader\'s name (ld=...); checked against Debian 12\'s libc6 (x86-64) and libc6-i386 packages.\nglibc_sonames = [\n    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",\n    "libresolv.so.2", "libanl.so.1", "libnsl.so.1", "libBrokenLocale.so.1", "libthread_db.so.1",\n    "libnss_files.so.2", "libnss_dns.so.2", "libnss_compat.so.2", "libnss_db.so.2",\n    "libnss_hesiod.so.2", "libmvec.so.1", "libc_malloc_debug.so.0",\n    # the dynamic loader, by architecture\n    "ld-linux-x86-64.so.2",  # x86-64\n    "ld-linux-x32.so.2",  # x86-64, x32 ABI\n    "ld-linux.so.2",  # i386 (32-bit x86)\n    "ld-linux-aarch64.so.1", "ld-linux-aarch64_be.so.1",  # aarch64\n    "ld-linux-armhf.so.3", "ld-linux.so.3",  # arm, hard-float and soft-float\n    "ld64.so.2",  # ppc64 little-endian (ELFv2)\n    "ld64.so.1",  # ppc64 big-endian, s390x\n    "ld.so.1",  # ppc, s390, mips\n    "ld-linux-riscv64-lp64d.so.1", "ld-linux-riscv64-lp64.so.1",  # riscv64\n    "ld-linux-loongarch-lp64d.so.1",  # loongarch64\n]\n\n# glibc\'s ABI markers: symbol versions that stand for a feature of the dynamic loader, not for an\n# interface. The linker adds a need for one when the feature is used, and only the glibc release\n# below and later ones define it, so the marker raises the glibc floor like GLIBC_<that release>.\n[glibc_abi.GLIBC_ABI_DT_RELR]\nglibc = "2.36"\nmeaning = "packed relative relocations, from ld -z pack-relative-relocs"\nsource = """glibc 2.36 NEWS ("Support for DT_RELR relative relocation format has been added"); \\\nelf/Versions defines GLIBC_ABI_DT_RELR for libc from 2.36; binutils >= 2.38 adds the need to \\\nlibc.so.6 with -z pack-relative-relocs (seen here: gcc 12, binutils 2.40, glibc 2.36)"""\n\n# Source of both tables: the libstdc++ manual, "ABI Policy and Guidelines", section "Symbol\n# versioning on the libstdc++.so binary" (gcc.gnu.org/onlinedocs/libstdc++/manual/abi.html; in\n# GCC\'s sources libstdc++-v3/doc/xml/manual/abi.xml). It lists, per GCC release, the newest\n# GLIBCXX and CXXABI version that release\'s libstdc++.so.6 defines. Each value below is the first\n# release that defines the key, named as that list names it (without the trailing ".0"). A row\n# marked "point release" names a release branch\'s later release: the .1 release of that major\n# lacks the version, so "GCC 13.2" is not "GCC 13". A release the list leaves out (e.g. GCC 10.1)\n# defines the same versions as the one before it. Checked row by row against that list up to\n# GCC 14.1.0; the GCC 15.1 rows are marked where they rest on less.\n\n# GLIBCXX_<version> → the GCC release whose libstdc++ first provides it.\n[glibcxx]\n"3.4.19" = "GCC 4.8.3"  # point release: GCC 4.8.0 stops at 3.4.18\n"3.4.20" = "GCC 4.9"\n"3.4.21" = "GCC 5.1"\n"3.4.22" = "GCC 6.1"\n"3.4.23" = "GCC 7.1"\n"3.4.24" = "GCC 7.2"  # point release: GCC 7.1 stops at 3.4.23\n"3.4.25" = "GCC 8.1"\n"3.4.26" = "GCC 9.1"\n"3.4.27" = "GCC 9.2"  # point release: GCC 9.1 stops at 3.4.26\n"3.4.28" = "GCC 9.3"  # point release: GCC 9.2 stops at 3.4.27; GCC 10.1 also stops at 3.4.28\n"3.4.29" = "GCC 11.1"\n"3.4.30" = "GCC 12.1"\n"3.4.31" = "GCC 13.1"\n"3.4.32" = "GCC 13.2"  # point release: GCC 13.1 stops at 3.4.31\n"3.4.33" = "GCC 14.1"\n"3.4.34" = "GCC 15.1"  # GCC 15\'s libstdc++.so.6.0.34; the list\'s GCC 15 entry was not read\n\n# CXXABI_<version> → the GCC release whose libstdc++ first provides it (same list).\n[cxxabi]\n"1.3.7" = "GCC 4.8"\n"1.3.8" = "GCC 4.9"\n"1.3.9" = "GCC 5.1"\n"1.3.10" = "GCC 6.1"\n"1.3.11" = "GCC 7.1"  # GCC 7.2 and 8.1 add no CXXABI version\n"1.3.12" = "GCC 9.1"  # also the newest in GCC 10.1\n"1.3.13" = "GCC 11.1"  # also the newest in GCC 12.1\n"1.3.14" = "GCC 13.1"  # also the newest in GCC 13.2\n"1.3.15" = "GCC 14.1"\n"1.3.16" = "GCC 15.1"  # as 3.4.34; reported to hold symbols on RISC-V only (bf16 typeinfo)\n\n# Sonames that belong to one product: the floor table shows them in one row.\n[families]\n"FFmpeg 4.x runtime" = ["libavcodec.so.58", "libavformat.so.58", "libavutil.so.56", "libswscale.so.5", "libswresample.so.3"]\n"FFmpeg 5.x runtime" = ["libavcodec.so.59", "libavformat.so.59", "libavutil.so.57", "libswscale.so.6", "libswresample.so.4"]\n"FFmpeg 6.x runtime" = ["libavcodec.so.60", "libavformat.so.60", "libavutil.so.58", "libswscale.so.7", "libswresample.so.4"]\n"FFmpeg 7.x runtime" = ["libavcodec.so.61", "libavformat.so.61", "libavutil.so.59", "libswscale.so.8", "libswresample.so.5"]\n"CUDA 12 runtime" = ["libcudart.so.12"]\n"CUDA 13 runtime" = ["libcudart.so.13"]\n\n'


def parsed() -> dict[str, Any]:
    """A new copy each time: the caller may change it."""
    return {'schema': 1,
            'glibc_sonames': ['libc.so.6',
                              'libm.so.6',
                              'libdl.so.2',
                              'libpthread.so.0',
                              'librt.so.1',
                              'libutil.so.1',
                              'libresolv.so.2',
                              'libanl.so.1',
                              'libnsl.so.1',
                              'libBrokenLocale.so.1',
                              'libthread_db.so.1',
                              'libnss_files.so.2',
                              'libnss_dns.so.2',
                              'libnss_compat.so.2',
                              'libnss_db.so.2',
                              'libnss_hesiod.so.2',
                              'libmvec.so.1',
                              'libc_malloc_debug.so.0',
                              'ld-linux-x86-64.so.2',
                              'ld-linux-x32.so.2',
                              'ld-linux.so.2',
                              'ld-linux-aarch64.so.1',
                              'ld-linux-aarch64_be.so.1',
                              'ld-linux-armhf.so.3',
                              'ld-linux.so.3',
                              'ld64.so.2',
                              'ld64.so.1',
                              'ld.so.1',
                              'ld-linux-riscv64-lp64d.so.1',
                              'ld-linux-riscv64-lp64.so.1',
                              'ld-linux-loongarch-lp64d.so.1'],
            'glibc_abi': {'GLIBC_ABI_DT_RELR': {'glibc': '2.36',
                                                'meaning': 'packed relative relocations, from ld -z '
                                                           'pack-relative-relocs',
                                                'source': 'glibc 2.36 NEWS ("Support for DT_RELR relative '
                                                          'relocation format has been added"); '
                                                          'elf/Versions defines GLIBC_ABI_DT_RELR for '
                                                          'libc from 2.36; binutils >= 2.38 adds the need '
                                                          'to libc.so.6 with -z pack-relative-relocs '
                                                          '(seen here: gcc 12, binutils 2.40, glibc '
                                                          '2.36)'}},
            'glibcxx': {'3.4.19': 'GCC 4.8.3',
                        '3.4.20': 'GCC 4.9',
                        '3.4.21': 'GCC 5.1',
                        '3.4.22': 'GCC 6.1',
                        '3.4.23': 'GCC 7.1',
                        '3.4.24': 'GCC 7.2',
                        '3.4.25': 'GCC 8.1',
                        '3.4.26': 'GCC 9.1',
                        '3.4.27': 'GCC 9.2',
                        '3.4.28': 'GCC 9.3',
                        '3.4.29': 'GCC 11.1',
                        '3.4.30': 'GCC 12.1',
                        '3.4.31': 'GCC 13.1',
                        '3.4.32': 'GCC 13.2',
                        '3.4.33': 'GCC 14.1',
                        '3.4.34': 'GCC 15.1'},
            'cxxabi': {'1.3.7': 'GCC 4.8',
                       '1.3.8': 'GCC 4.9',
                       '1.3.9': 'GCC 5.1',
                       '1.3.10': 'GCC 6.1',
                       '1.3.11': 'GCC 7.1',
                       '1.3.12': 'GCC 9.1',
                       '1.3.13': 'GCC 11.1',
                       '1.3.14': 'GCC 13.1',
                       '1.3.15': 'GCC 14.1',
                       '1.3.16': 'GCC 15.1'},
            'families': {'FFmpeg 4.x runtime': ['libavcodec.so.58',
                                                'libavformat.so.58',
                                                'libavutil.so.56',
                                                'libswscale.so.5',
                                                'libswresample.so.3'],
                         'FFmpeg 5.x runtime': ['libavcodec.so.59',
                                                'libavformat.so.59',
                                                'libavutil.so.57',
                                                'libswscale.so.6',
                                                'libswresample.so.4'],
                         'FFmpeg 6.x runtime': ['libavcodec.so.60',
                                                'libavformat.so.60',
                                                'libavutil.so.58',
                                                'libswscale.so.7',
                                                'libswresample.so.4'],
                         'FFmpeg 7.x runtime': ['libavcodec.so.61',
                                                'libavformat.so.61',
                                                'libavutil.so.59',
                                                'libswscale.so.8',
                                                'libswresample.so.5'],
                         'CUDA 12 runtime': ['libcudart.so.12'],
                         'CUDA 13 runtime': ['libcudart.so.13']}}
