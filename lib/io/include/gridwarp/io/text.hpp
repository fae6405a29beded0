// Text files as editors and spreadsheets write them.
#pragma once

#include <string_view>

namespace gridwarp::io {

// `text` without a leading UTF-8 byte-order mark (EF BB BF): Excel's "CSV UTF-8" and some Windows
// editors write one first. It marks the encoding and is no part of the content. Every text format
// gridwarp parses (manifests, text matrices) goes through here.
inline std::string_view without_byte_order_mark(std::string_view text) {
    constexpr std::string_view kMark = "\xEF\xBB\xBF";
    return text.substr(0, kMark.size()) == kMark ? text.substr(kMark.size()) : text;
}

}  // namespace gridwarp::io
