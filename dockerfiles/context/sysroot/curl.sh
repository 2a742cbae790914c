#!/bin/bash
# libcurl 8.14 with OpenSSL 3 (the library only; no curl program).
. /opt/ninfer-kits/build/common.sh
unpack curl_8.14.1.orig.tar.gz
cd "$WORK/curl-8.14.1"
# No CA file is compiled in: a missing file is fatal to every transfer, and no one file exists
# on both Debian's and Red Hat's families; a CA path list is looked up lazily, a missing folder
# skipped. Symbols are versioned (CURL_OPENSSL_4) as Debian's are.
./configure --prefix=/usr/local --disable-static --enable-shared --enable-versioned-symbols \
    --with-openssl="$SYSROOT/usr/local" --with-zlib --without-libpsl --without-brotli \
    --without-zstd --without-libidn2 --without-nghttp2 --without-nghttp3 --without-ngtcp2 \
    --without-libssh2 --without-libssh --without-librtmp --without-gssapi --disable-ldap \
    --disable-ldaps --disable-manual --disable-docs --without-ca-bundle --without-ca-fallback \
    --with-ca-path=/etc/ssl/certs:/etc/pki/ca-trust/extracted/pem/directory-hash \
    CFLAGS=-O2 LDFLAGS="-L$SYSROOT/usr/local/lib -Wl,-rpath,\\\$\$ORIGIN" \
    > configure.log 2>&1 || { tail -40 configure.log; exit 1; }
make -j"$JOBS" -C lib > make.log 2>&1 || { tail -40 make.log; exit 1; }
for part in lib include; do make -C "$part" install DESTDIR="$WORK/stage" > install.log 2>&1; done
make install-pkgconfigDATA DESTDIR="$WORK/stage" >> install.log 2>&1
rm -f "$WORK"/stage/usr/local/lib/libcurl.la
install_recorded curl 8.14.1 curl_8.14.1.orig.tar.gz curl COPYING
rm -rf "$WORK"
done_step "libcurl 8.14.1"
