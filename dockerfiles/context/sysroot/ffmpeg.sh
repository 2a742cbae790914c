#!/bin/bash
# FFmpeg 7.1's libraries (no programs), with the demuxers, parsers and decoders of the common
# still-image, audio and video formats; no external codec libraries, no hardware decoding.
. /opt/ninfer-kits/build/common.sh
unpack ffmpeg_7.1.5.orig.tar.xz
cd "$WORK/ffmpeg-7.1.5"
demuxers=mov,matroska,avi,wav,mp3,flac,ogg,aac,image2,image_jpeg_pipe,image_png_pipe,image_webp_pipe,image_bmp_pipe,gif
decoders=h264,hevc,vp8,vp9,mpeg4,mjpeg,png,webp,gif,bmp,aac,mp3,flac,vorbis,opus,pcm_s16le,pcm_s24le,pcm_f32le
parsers=h264,hevc,vp8,vp9,mpeg4video,aac,mpegaudio,flac,vorbis,opus,mjpeg,png,webp,gif
./configure --prefix=/usr/local --cc="$CC" --cxx="$CXX" --disable-programs --disable-doc \
    --disable-static --enable-shared --disable-autodetect --disable-debug --disable-avdevice \
    --disable-avfilter --enable-swscale --enable-swresample --enable-zlib --disable-everything \
    --disable-network --enable-protocol=file,pipe --enable-demuxer=$demuxers \
    --enable-decoder=$decoders --enable-parser=$parsers > configure.log 2>&1 \
    || { tail -40 configure.log; tail -40 ffbuild/config.log; exit 1; }
# configure evaluates its ld flags and make expands config.mak twice: $ORIGIN needs four $.
sed -i 's|^LDSOFLAGS=\(.*\)$|LDSOFLAGS=\1 -Wl,-rpath,\\$$$$ORIGIN|' ffbuild/config.mak
make -j"$JOBS" > make.log 2>&1 || { tail -40 make.log; exit 1; }
make install DESTDIR="$WORK/stage" > install.log 2>&1 || { tail -40 install.log; exit 1; }
rm -rf "$WORK/stage/usr/local/share/ffmpeg"
install_recorded ffmpeg 7.1.5 ffmpeg_7.1.5.orig.tar.xz LGPL-2.1-or-later COPYING.LGPLv2.1 LICENSE.md
rm -rf "$WORK"
done_step "FFmpeg 7.1.5"
