// FFmpeg, linked as the upstreams link it (pkg-config: libavformat, libavcodec, libavutil,
// libswscale): the versions of the libraries loaded at run time, for --help and the report.
#include <string>

#include "ninfer/ninfer.hpp"

#if NINFER_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libswscale/swscale.h>
}

namespace ninfer {

namespace {

std::string dotted(unsigned version) {
  return std::to_string(AV_VERSION_MAJOR(version)) + "." +
         std::to_string(AV_VERSION_MINOR(version)) + "." +
         std::to_string(AV_VERSION_MICRO(version));
}

}  // namespace

std::string media_info() {
  return "libavformat " + dotted(avformat_version()) + ", libavcodec " +
         dotted(avcodec_version()) + ", libavutil " + dotted(avutil_version()) +
         ", libswscale " + dotted(swscale_version());
}

}  // namespace ninfer
#else
namespace ninfer {
std::string media_info() { return "not linked (NINFER_WITH_FFMPEG=OFF)"; }
}  // namespace ninfer
#endif
