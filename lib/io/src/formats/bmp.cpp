#include "formats/bmp.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "files/output_file.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kFileHeaderBytes = 14;
constexpr std::size_t kInfoHeaderBytes = 40;  // BITMAPINFOHEADER, what gridwarp (and OpenCV) write
constexpr std::size_t kGreyPaletteBytes = 256 * 4;

std::uint32_t le32(std::string_view bytes, std::size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

std::uint16_t le16(std::string_view bytes, std::size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

void put_le32(std::uint8_t* p, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

void put_le16(std::uint8_t* p, std::uint16_t value) {
    p[0] = static_cast<std::uint8_t>(value);
    p[1] = static_cast<std::uint8_t>(value >> 8);
}

// Stored rows are padded to whole 4-byte words.
std::uint64_t stored_row_bytes(std::uint64_t width, unsigned bits_per_pixel) { return (width * bits_per_pixel + 31) / 32 * 4; }

std::string extension_of(const fs::path& file) {
    std::string extension = lowercase_filename(file.extension());
    if (!extension.empty()) extension.erase(0, 1);
    return extension;
}

// Reads the file's rows, starting at byte `offset`, into `pieces` (a gathered read: the rows land
// in the image's order straight from the page cache).
void read_gathered(const fs::path& file, std::uint64_t offset, std::vector<iovec> pieces) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FileError(file, std::string("cannot open for reading: ") + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    std::size_t next = 0;
    for (;;) {
        while (next < pieces.size() && pieces[next].iov_len == 0) ++next;
        if (next == pieces.size()) return;
        const int count = static_cast<int>(std::min<std::size_t>(pieces.size() - next, IOV_MAX));
        const ssize_t n = ::preadv(fd, pieces.data() + next, count, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw FileError(file, std::string("read failed: ") + std::strerror(errno));
        if (n == 0) throw FileError(file, "truncated: the file ended while its pixel rows were read");
        offset += static_cast<std::uint64_t>(n);
        auto left = static_cast<std::size_t>(n);
        while (next < pieces.size() && left > 0 && left >= pieces[next].iov_len) left -= pieces[next++].iov_len;
        if (left > 0) {
            pieces[next].iov_base = static_cast<char*>(pieces[next].iov_base) + left;
            pieces[next].iov_len -= left;
        }
    }
}

// One iovec per stored row (and one for its padding), in the file's order: the file's first row is
// the image's last unless the rows are stored top-down.
std::vector<iovec> row_pieces(std::uint8_t* pixels, std::int64_t height, std::size_t row_bytes, std::size_t padding,
                              bool bottom_up, std::uint8_t* padding_bytes) {
    std::vector<iovec> pieces;
    pieces.reserve(static_cast<std::size_t>(height) * (padding > 0 ? 2 : 1));
    for (std::int64_t stored = 0; stored < height; ++stored) {
        const std::int64_t row = bottom_up ? height - 1 - stored : stored;
        pieces.push_back({pixels + static_cast<std::size_t>(row) * row_bytes, row_bytes});
        if (padding > 0) pieces.push_back({padding_bytes, padding});
    }
    return pieces;
}

}  // namespace

std::optional<Image> read_plain_bmp(const fs::path& file, std::string_view head, std::uint64_t file_size) {
    if (head.size() < kFileHeaderBytes + kInfoHeaderBytes || head.substr(0, 2) != "BM") return std::nullopt;
    const std::uint32_t data_offset = le32(head, 10);
    const std::uint32_t info_size = le32(head, 14);
    // BITMAPINFOHEADER and its extensions (V2, V3, V4, V5), which share its first 40 bytes.
    if (info_size != 40 && info_size != 52 && info_size != 56 && info_size != 108 && info_size != 124) return std::nullopt;
    const auto width = static_cast<std::int32_t>(le32(head, 18));
    const auto signed_height = static_cast<std::int32_t>(le32(head, 22));  // negative: rows stored top-down
    const unsigned planes = le16(head, 26), bits = le16(head, 28);
    const std::uint32_t compression = le32(head, 30), colours_used = le32(head, 46);
    if (width <= 0 || signed_height == 0 || signed_height == INT32_MIN || planes != 1 || compression != 0 /* BI_RGB */) return std::nullopt;
    if (bits != 24 && bits != 8) return std::nullopt;

    // 8-bit pixels index a palette; a palette of 256 greys decodes to one grey channel.
    std::array<std::uint8_t, 256> grey{};
    bool grey_is_index = true;
    if (bits == 8) {
        const std::size_t palette_at = kFileHeaderBytes + info_size;
        if (colours_used != 0 && colours_used != 256) return std::nullopt;
        if (palette_at + kGreyPaletteBytes > data_offset || palette_at + kGreyPaletteBytes > head.size()) return std::nullopt;
        for (std::size_t i = 0; i < 256; ++i) {
            const auto* entry = reinterpret_cast<const unsigned char*>(head.data() + palette_at + 4 * i);  // B, G, R, 0
            if (entry[0] != entry[1] || entry[0] != entry[2]) return std::nullopt;  // a colour palette
            grey[i] = entry[0];
            grey_is_index = grey_is_index && grey[i] == i;
        }
    }

    const std::int64_t height = signed_height < 0 ? -std::int64_t{signed_height} : std::int64_t{signed_height};
    const std::int64_t channels = bits / 8;
    const std::uint64_t stored_bytes = stored_row_bytes(static_cast<std::uint64_t>(width), bits);
    const auto row_bytes = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
    // (Both factors are below 2^34 and 2^31: no overflow.)
    if (data_offset > file_size || stored_bytes * static_cast<std::uint64_t>(height) > file_size - data_offset) {
        throw FileError(file, "truncated: a " + std::to_string(width) + "x" + std::to_string(height) + " BMP needs " +
                                  std::to_string(stored_bytes * static_cast<std::uint64_t>(height)) +
                                  " bytes of pixel rows after byte " + std::to_string(data_offset) + ", the file holds " +
                                  std::to_string(file_size > data_offset ? file_size - data_offset : 0));
    }

    Image image = decoded_raster(DType::UInt8, height, width, channels);
    image.format = extension_of(file);
    auto* pixels = image.pixels.data_as<std::uint8_t>();
    std::array<std::uint8_t, 4> padding{};
    read_gathered(file, data_offset,
                  row_pieces(pixels, height, row_bytes, stored_bytes - row_bytes, signed_height > 0, padding.data()));
    if (!grey_is_index) {
        const std::size_t count = static_cast<std::size_t>(height) * row_bytes;
        for (std::size_t i = 0; i < count; ++i) pixels[i] = grey[pixels[i]];
    }
    return image;
}

bool write_plain_bmp(const StagedFile& staged, const Image& image) {
    const std::string extension = extension_of(staged.target);
    if (extension != "bmp" && extension != "dib") return false;
    if (image.batch != 1 || image.spatial.size() != 2 || image.dtype() != DType::UInt8) return false;
    if (image.channels != 1 && image.channels != 3 && image.channels != 4) return false;
    const std::int64_t height = image.spatial[0], width = image.spatial[1];
    const auto bits = static_cast<unsigned>(8 * image.channels);
    const std::uint64_t stored_bytes = stored_row_bytes(static_cast<std::uint64_t>(width), bits);
    const std::size_t headers = kFileHeaderBytes + kInfoHeaderBytes + (image.channels == 1 ? kGreyPaletteBytes : 0);
    const unsigned __int128 file_bytes = static_cast<unsigned __int128>(stored_bytes) * static_cast<std::uint64_t>(height) + headers;
    if (width > INT32_MAX || height > INT32_MAX || file_bytes > UINT32_MAX) {
        throw FileError(staged.target, "a " + std::to_string(width) + "x" + std::to_string(height) +
                                    " image does not fit a BMP staged.file (at most 4 GiB; write .png or .tif)");
    }

    std::vector<std::uint8_t> header(headers, 0);
    header[0] = 'B';
    header[1] = 'M';
    put_le32(&header[2], static_cast<std::uint32_t>(file_bytes));
    put_le32(&header[10], static_cast<std::uint32_t>(headers));
    put_le32(&header[14], kInfoHeaderBytes);
    put_le32(&header[18], static_cast<std::uint32_t>(width));
    put_le32(&header[22], static_cast<std::uint32_t>(height));  // positive: rows stored bottom-up
    put_le16(&header[26], 1);
    put_le16(&header[28], static_cast<std::uint16_t>(bits));
    // Compression BI_RGB, image size, resolution and palette counts stay 0, as OpenCV writes them.
    if (image.channels == 1) {
        for (std::size_t i = 0; i < 256; ++i) std::fill_n(&header[kFileHeaderBytes + kInfoHeaderBytes + 4 * i], 3, static_cast<std::uint8_t>(i));
    }

    Tensor scratch;
    auto* pixels = static_cast<std::uint8_t*>(const_cast<void*>(pixels_in_layout(image, ChannelLayout::Interleaved, scratch)));
    const auto row_bytes = static_cast<std::size_t>(width * image.channels);
    std::array<std::uint8_t, 4> padding{};
    std::vector<iovec> pieces{{header.data(), header.size()}};
    const auto rows = row_pieces(pixels, height, row_bytes, stored_bytes - row_bytes, true, padding.data());
    pieces.insert(pieces.end(), rows.begin(), rows.end());
    OutputFile out(staged);
    out.write_gathered(std::move(pieces));
    out.close();
    return true;
}

}  // namespace gridwarp::io::detail
