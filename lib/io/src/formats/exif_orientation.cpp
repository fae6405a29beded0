#include "formats/exif_orientation.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace gridwarp::io::detail {

namespace {

constexpr std::uint16_t kOrientationTag = 0x0112;
constexpr std::uint16_t kShortType = 3;
// The segment or chunk an EXIF block may fill: JPEG's APP1 holds at most 64 KiB; other containers
// are read up to this much, and a larger block is not read.
constexpr std::uint32_t kMaxExifBytes = 1 << 20;

using ReadAt = std::function<bool(std::uint64_t offset, std::size_t size, std::uint8_t* out)>;

// The orientation in IFD0 of a TIFF structure that `read` gives from its first byte.
int tiff_orientation(const ReadAt& read) {
    std::uint8_t header[8];
    if (!read(0, sizeof header, header)) return 0;
    const bool little = header[0] == 'I' && header[1] == 'I' && header[2] == 42 && header[3] == 0;
    const bool big = header[0] == 'M' && header[1] == 'M' && header[2] == 0 && header[3] == 42;
    if (!little && !big) return 0;
    const auto u16 = [&](const std::uint8_t* p) {
        return static_cast<std::uint16_t>(little ? p[0] | (p[1] << 8) : (p[0] << 8) | p[1]);
    };
    const auto u32 = [&](const std::uint8_t* p) {
        return little ? std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24)
                      : (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
    };
    const std::uint32_t ifd = u32(header + 4);
    std::uint8_t count_bytes[2];
    if (!read(ifd, 2, count_bytes)) return 0;
    const std::uint16_t entries = u16(count_bytes);
    std::vector<std::uint8_t> table(std::size_t{entries} * 12);
    if (entries == 0 || !read(std::uint64_t{ifd} + 2, table.size(), table.data())) return 0;
    for (std::uint16_t e = 0; e < entries; ++e) {
        const std::uint8_t* entry = table.data() + std::size_t{e} * 12;
        if (u16(entry) != kOrientationTag) continue;
        if (u16(entry + 2) != kShortType || u32(entry + 4) != 1) return 0;
        const std::uint16_t value = u16(entry + 8);
        return value >= 1 && value <= 8 ? value : 0;
    }
    return 0;
}

int block_orientation(const std::vector<std::uint8_t>& block) {
    // Some writers start the block with JPEG's "Exif\0\0" in PNG and WebP too.
    const std::size_t skip = block.size() >= 6 && std::memcmp(block.data(), "Exif\0\0", 6) == 0 ? 6 : 0;
    return tiff_orientation([&](std::uint64_t offset, std::size_t size, std::uint8_t* out) {
        if (offset > block.size() - skip || size > block.size() - skip - offset) return false;
        std::memcpy(out, block.data() + skip + offset, size);
        return true;
    });
}

class FileReader {
public:
    explicit FileReader(const std::filesystem::path& file) : in_(file, std::ios::binary) {}
    bool read(std::uint64_t offset, std::size_t size, std::uint8_t* out) {
        if (!in_) in_.clear();
        in_.seekg(static_cast<std::streamoff>(offset));
        return in_.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(size)) && in_.gcount() == static_cast<std::streamsize>(size);
    }
    bool block(std::uint64_t offset, std::uint32_t size, std::vector<std::uint8_t>& out) {
        if (size > kMaxExifBytes) return false;
        out.resize(size);
        return read(offset, size, out.data());
    }

private:
    std::ifstream in_;
};

int jpeg_orientation(FileReader& file) {
    std::uint64_t at = 2;
    std::uint8_t marker[4];
    for (int segments = 0; segments < 64 && file.read(at, 4, marker); ++segments) {
        if (marker[0] != 0xFF) return 0;
        if (marker[1] == 0xFF) {  // fill byte
            ++at;
            continue;
        }
        if (marker[1] == 0xDA || marker[1] == 0xD9) return 0;  // image data: the metadata is behind
        const std::uint32_t length = (std::uint32_t{marker[2]} << 8) | marker[3];
        if (length < 2) return 0;
        if (marker[1] == 0xE1 && length > 8) {
            std::vector<std::uint8_t> data;
            if (!file.block(at + 4, length - 2, data)) return 0;
            if (std::memcmp(data.data(), "Exif\0\0", 6) == 0) return block_orientation(data);
        }
        at += 2 + length;
    }
    return 0;
}

int png_orientation(FileReader& file) {
    std::uint64_t at = 8;
    std::uint8_t head[8];
    for (int chunks = 0; chunks < 100000 && file.read(at, 8, head); ++chunks) {
        const std::uint32_t length = (std::uint32_t{head[0]} << 24) | (std::uint32_t{head[1]} << 16) | (std::uint32_t{head[2]} << 8) | head[3];
        if (std::memcmp(head + 4, "eXIf", 4) == 0) {
            std::vector<std::uint8_t> data;
            return file.block(at + 8, length, data) ? block_orientation(data) : 0;
        }
        if (std::memcmp(head + 4, "IEND", 4) == 0) return 0;
        at += std::uint64_t{length} + 12;
    }
    return 0;
}

int webp_orientation(FileReader& file) {
    std::uint64_t at = 12;
    std::uint8_t head[8];
    for (int chunks = 0; chunks < 1000 && file.read(at, 8, head); ++chunks) {
        const std::uint32_t size = std::uint32_t{head[4]} | (std::uint32_t{head[5]} << 8) | (std::uint32_t{head[6]} << 16) | (std::uint32_t{head[7]} << 24);
        if (std::memcmp(head, "EXIF", 4) == 0) {
            std::vector<std::uint8_t> data;
            return file.block(at + 8, size, data) ? block_orientation(data) : 0;
        }
        at += 8 + std::uint64_t{size} + (size & 1);
    }
    return 0;
}

}  // namespace

int read_exif_orientation(const std::filesystem::path& file) {
    FileReader reader(file);
    std::uint8_t signature[12];
    if (!reader.read(0, sizeof signature, signature)) return 0;
    if (signature[0] == 0xFF && signature[1] == 0xD8) return jpeg_orientation(reader);
    if (std::memcmp(signature, "\x89PNG\r\n\x1a\n", 8) == 0) return png_orientation(reader);
    if (std::memcmp(signature, "RIFF", 4) == 0 && std::memcmp(signature + 8, "WEBP", 4) == 0) return webp_orientation(reader);
    return 0;
}

void apply_exif_orientation(Image& image, int orientation) {
    if (orientation < 2 || orientation > 8) return;
    const std::int64_t height = image.spatial[0], width = image.spatial[1];
    const bool swaps = orientation >= 5;
    const std::int64_t out_height = swaps ? width : height, out_width = swaps ? height : width;
    const auto pixel_bytes = static_cast<std::size_t>(image.channels) * dtype_size(image.dtype());
    const auto page_bytes = static_cast<std::size_t>(height * width) * pixel_bytes;
    Shape shape{out_height, out_width, image.channels};
    if (image.batch != 1) shape.insert(shape.begin(), image.batch);
    Tensor turned(image.dtype(), shape);
    // The stored pixel (row, column) each shown pixel (r, c) comes from.
    const auto from = [&](std::int64_t r, std::int64_t c) -> std::array<std::int64_t, 2> {
        switch (orientation) {
            case 2: return {r, width - 1 - c};
            case 3: return {height - 1 - r, width - 1 - c};
            case 4: return {height - 1 - r, c};
            case 5: return {c, r};
            case 6: return {height - 1 - c, r};
            case 7: return {height - 1 - c, width - 1 - r};
            default: return {c, width - 1 - r};
        }
    };
    for (std::int64_t page = 0; page < image.batch; ++page) {  // the pages of a TIFF
        const auto* source = static_cast<const std::uint8_t*>(image.pixels.data()) + page_bytes * static_cast<std::size_t>(page);
        auto* target = static_cast<std::uint8_t*>(turned.data()) + page_bytes * static_cast<std::size_t>(page);
        for (std::int64_t r = 0; r < out_height; ++r) {
            for (std::int64_t c = 0; c < out_width; ++c) {
                const auto [row, column] = from(r, c);
                std::memcpy(target + static_cast<std::size_t>(r * out_width + c) * pixel_bytes,
                            source + static_cast<std::size_t>(row * width + column) * pixel_bytes, pixel_bytes);
            }
        }
    }
    image.pixels = std::move(turned);
    image.spatial = {out_height, out_width};
}

}  // namespace gridwarp::io::detail
