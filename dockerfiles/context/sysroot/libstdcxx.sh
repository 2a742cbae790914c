#!/bin/bash
# libstdc++ of GCC 14.2.0, built alone against the sysroot: the image's own libstdc++.a needs
# glibc 2.38 (__isoc23_strtol, arc4random, __libc_single_threaded).
. /opt/ninfer-kits/build/common.sh
unpack gcc-14_14.2.0.orig.tar.gz
tar -xf "$WORK/gcc-14-14.2.0/gcc-14.2.0-dfsg.tar.xz" -C "$WORK" --exclude=gcc-14.2.0/gcc/testsuite --exclude=gcc-14.2.0/libgo --exclude=gcc-14.2.0/gcc/ada
src="$WORK/gcc-14.2.0"
build="$WORK/gcc-build"
mkdir -p "$build/libstdc++-v3" "$build/libgcc"
# A full GCC build makes gthr-default.h in libgcc's build folder; without it configure quietly
# decides there are no threads and builds a libstdc++ without std::thread and std::mutex.
cp "$src/libgcc/gthr-posix.h" "$build/libgcc/gthr-default.h"
cd "$build/libstdc++-v3"
flags="--sysroot=$SYSROOT -B$SYSROOT/usr/lib/$MULTIARCH/ -include /opt/ninfer-kits/include/glibc-2.28.h"
libs="-L$SYSROOT/usr/lib/$MULTIARCH -L$SYSROOT/lib/$MULTIARCH"
# pthread_cond_clockwait, pthread_mutex_clocklock and pthread_rwlock_clock*lock came with glibc
# 2.30 and have no older version: a libstdc++ that uses them (in <condition_variable>, <mutex>
# and <shared_mutex>, inline in the kit's own code too) raises every kit's floor to 2.30. Told
# they are missing, it waits on CLOCK_REALTIME as it does on older glibc.
export glibcxx_cv_PTHREAD_COND_CLOCKWAIT=no glibcxx_cv_PTHREAD_MUTEX_CLOCKLOCK=no \
    glibcxx_cv_PTHREAD_RWLOCK_CLOCKLOCK=no
CC="gcc-14 $flags" CXX="g++-14 $flags -nostdinc++" CFLAGS=-O2 CXXFLAGS=-O2 LDFLAGS="$libs" \
    "$src/libstdc++-v3/configure" --host=$MULTIARCH --build=$MULTIARCH --prefix="$STDCXX" \
    --disable-multilib --disable-nls --disable-libstdcxx-pch --enable-clocale=gnu --enable-tls \
    --with-default-libstdcxx-abi=new --enable-libstdcxx-time=yes --disable-shared --with-pic \
    > configure.log 2>&1 || { tail -40 configure.log; exit 1; }
grep -q '^#define _GLIBCXX_HAS_GTHREADS 1' config.h \
    || { echo "libstdc++: configure found no threads" >&2; exit 1; }
! grep -E '^#define _GLIBCXX_USE_PTHREAD_(COND_CLOCKWAIT|MUTEX_CLOCKLOCK|RWLOCK_CLOCKLOCK)' config.h \
    || { echo "libstdc++: configure still uses glibc 2.30's clock functions" >&2; exit 1; }
make -j"$JOBS" > make.log 2>&1 || { tail -40 make.log; exit 1; }
make install DESTDIR="$WORK/stage" > install.log 2>&1 || { tail -40 install.log; exit 1; }
rm -rf "$WORK/stage$STDCXX/share" "$WORK/stage$STDCXX"/lib/*.la "$WORK/stage$STDCXX"/lib/*.py
# statically linked into every kit: its notice travels with the kit's compiled-in licences
PREFIX=/ DOCS="$STDCXX/share/doc" install_recorded libstdc++ 14.2.0 gcc-14_14.2.0.orig.tar.gz \
    "GPL-3.0-or-later WITH GCC-exception-3.1" "$src/COPYING3" "$src/COPYING.RUNTIME"
rm -rf "$WORK"
done_step "libstdc++ 14.2.0"
