// Internal: text and file names in lower case, and byte-order fields, for matching formats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace gridwarp::io::detail {

// Text and file names in lower case, for matching extensions.
std::string lowercase(std::string_view text);
std::string lowercase_filename(const std::filesystem::path& file);
bool ends_with(const std::string& text, const std::string& suffix);

// A big-endian 32-bit field (PNG's chunk lengths and IHDR).
inline std::uint32_t big_endian_32(const unsigned char* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

}  // namespace gridwarp::io::detail
