#!/bin/bash
# OpenSSL 3.5, libcurl's TLS: bullseye's libssl 1.1 is on no later distribution.
. /opt/ninfer-kits/build/common.sh
unpack openssl_3.5.7.orig.tar.gz
cd "$WORK/openssl-3.5.7"
# /usr/lib/ssl: Debian's and Ubuntu's OPENSSLDIR (openssl.cnf, certs); '\$$ORIGIN' reaches the
# linker as $ORIGIN through Configure and make.
./Configure linux-x86_64 shared no-tests no-docs no-apps --prefix=/usr/local --libdir=lib \
    --openssldir=/usr/lib/ssl '-Wl,-rpath,\$$ORIGIN' -O2 > configure.log 2>&1 \
    || { tail -40 configure.log; exit 1; }
# The shared libraries only: OpenSSL 3 compiles libcrypto and libssl twice, once for the static
# archives (no kit links them) and once for the shared ones; LIBS and INSTALL_LIBS emptied on
# make's command line build and install no archive, which halves the step.
make -j"$JOBS" LIBS= > make.log 2>&1 || { tail -40 make.log; exit 1; }
make install_sw LIBS= INSTALL_LIBS= DESTDIR="$WORK/stage" > install.log 2>&1 \
    || { tail -40 install.log; exit 1; }
install_recorded openssl 3.5.7 openssl_3.5.7.orig.tar.gz Apache-2.0 LICENSE.txt
rm -rf "$WORK"
done_step "OpenSSL 3.5.7"
