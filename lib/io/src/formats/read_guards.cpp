// What stands between a file and the third-party decoders (ITK, OpenCV): sizes the file declares
// are checked against the bytes it holds before a decoder allocates for them, and anything a
// decoder prints on stderr (a warning about damaged data included) fails the read. See
// docs/reliability.md.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>

#include "files/file_checks.hpp"
#include "formats/exif_orientation.hpp"
#include "formats/format_table.hpp"
#include "formats/read_guards.hpp"
#include "formats/tiff.hpp"
#include "formats/volume_header_check.hpp"
#include "gridwarp/io/error.hpp"
#include "modules/backends.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

std::string capture_stderr(const std::function<void()>& decode) {
    // File descriptor 2 belongs to the whole process, so captures are serialised: two decodes in
    // parallel (gridwarp batch) would otherwise swap each other's redirections and lose stderr.
    static std::mutex one_capture_at_a_time;
    const std::lock_guard<std::mutex> lock(one_capture_at_a_time);
    std::fflush(stderr);
    std::cerr.flush();
    std::FILE* sink = std::tmpfile();
    const int saved = sink ? ::dup(2) : -1;
    if (!sink || saved < 0 || ::dup2(::fileno(sink), 2) < 0) {
        if (sink) std::fclose(sink);
        if (saved >= 0) ::close(saved);
        decode();
        return "";
    }
    auto restore = [&] {
        std::fflush(stderr);
        std::cerr.flush();
        ::dup2(saved, 2);
        ::close(saved);
    };
    try {
        decode();
    } catch (...) {
        restore();
        std::fclose(sink);
        throw;
    }
    restore();
    std::string text;
    std::rewind(sink);
    char buffer[4096];
    std::size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, sink)) > 0 && text.size() < 65536) text.append(buffer, got);
    std::fclose(sink);
    return text;
}

std::string first_message_line(const std::string& text) {
    const auto start = text.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return "";
    const auto end = text.find_first_of("\r\n", start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.size() > 300) line = line.substr(0, 300) + "...";
    return line;
}

namespace {

// What an encoded image's header declares, read without decoding it.
struct DeclaredRaster {
    std::string format;
    std::uint64_t width = 0, height = 0, channels = 0;
    std::uint64_t value_bytes = 1;        // of one decoded value
    std::uint64_t least_coded_bytes = 0;  // fewer stored bytes cannot hold the pixels
    std::uint64_t coded_bytes = 0;        // the bytes the file has for them
};

// PNG: the IHDR chunk. The image data is deflate-compressed scanlines, so it needs at least
// 1/1032 of their size.
std::optional<DeclaredRaster> png_header(const std::string& head, std::uint64_t file_size) {
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (head.size() < 33 || head.compare(0, 8, reinterpret_cast<const char*>(magic), 8) != 0 || head.compare(12, 4, "IHDR") != 0) {
        return std::nullopt;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(head.data());
    DeclaredRaster raster;
    raster.format = "PNG";
    raster.width = big_endian_32(p + 16);
    raster.height = big_endian_32(p + 20);
    const unsigned bit_depth = p[24];
    raster.value_bytes = bit_depth > 8 ? 2 : 1;
    switch (p[25]) {
        case 0: case 3: raster.channels = 1; break;
        case 4: raster.channels = 2; break;
        case 2: raster.channels = 3; break;
        case 6: raster.channels = 4; break;
        default: return std::nullopt;  // left to the decoder to refuse
    }
    if (raster.width == 0 || raster.height == 0 || raster.width > (1u << 31) || raster.height > (1u << 31)) return raster;
    const std::uint64_t row_bytes = 1 + (raster.width * raster.channels * bit_depth + 7) / 8;
    raster.least_coded_bytes = raster.height * row_bytes / 1032;
    raster.coded_bytes = file_size > 33 ? file_size - 33 : 0;
    return raster;
}

// Sequential reads of a file past the head already in memory, through a window of its own.
class FileBytes {
  public:
    FileBytes(const fs::path& file, const std::string& head, std::uint64_t file_size)
        : file_(file), head_(head), file_size_(file_size) {}

    std::uint64_t size() const { return file_size_; }

    // The byte at `offset` (< size()), or -1 where the file cannot be read.
    int at(std::uint64_t offset) {
        if (offset < head_.size()) return static_cast<unsigned char>(head_[offset]);
        if (offset < window_start_ || offset >= window_start_ + window_.size()) {
            if (!in_.is_open()) in_.open(file_, std::ios::binary);
            window_.resize(kWindowBytes);
            in_.clear();
            in_.seekg(static_cast<std::streamoff>(offset));
            in_.read(window_.data(), static_cast<std::streamsize>(window_.size()));
            window_.resize(static_cast<std::size_t>(std::max<std::streamsize>(in_.gcount(), 0)));
            window_start_ = offset;
            if (window_.empty()) return -1;
        }
        return static_cast<unsigned char>(window_[offset - window_start_]);
    }

  private:
    static constexpr std::size_t kWindowBytes = 1 << 16;
    const fs::path& file_;
    const std::string& head_;
    std::uint64_t file_size_;
    std::ifstream in_;
    std::string window_;
    std::uint64_t window_start_ = 0;
};

// JPEG: the frame header (SOFn), found as libjpeg finds it: walking the marker segments from the
// start of the file, skipping stray bytes and fill bytes between them, wherever the frame sits.
// Huffman coding spends at least one bit on every 8x8 block's DC coefficient, so the coded data is
// at least (blocks / 8) bytes. (Arithmetic coding has no such bound: only the size limit applies.)
std::optional<DeclaredRaster> jpeg_header(FileBytes& bytes) {
    if (bytes.size() < 4 || bytes.at(0) != 0xFF || bytes.at(1) != 0xD8) return std::nullopt;
    const auto byte_at = [&](std::uint64_t offset) { return offset < bytes.size() ? bytes.at(offset) : -1; };
    std::uint64_t at = 2;
    for (;;) {
        while (byte_at(at) >= 0 && byte_at(at) != 0xFF) ++at;  // stray bytes (libjpeg warns and skips them)
        while (byte_at(at) == 0xFF) ++at;                      // fill bytes
        const int marker = byte_at(at);
        if (marker < 0) return std::nullopt;
        ++at;
        if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;  // no length
        if (marker == 0xD9 || marker == 0xDA) return std::nullopt;            // end of image, or a scan before any frame
        const int high = byte_at(at), low = byte_at(at + 1);
        if (high < 0 || low < 0) return std::nullopt;
        const std::uint64_t length = (std::uint64_t(high) << 8) | std::uint64_t(low);
        if (length < 2) return std::nullopt;
        const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (frame) {
            int field[6];
            for (int i = 0; i < 6; ++i) {
                field[i] = byte_at(at + 2 + std::uint64_t(i));
                if (field[i] < 0) return std::nullopt;
            }
            DeclaredRaster raster;
            raster.format = "JPEG";
            raster.value_bytes = field[0] > 8 ? 2 : 1;  // sample precision: 12-bit JPEGs decode to 16 bits
            raster.height = (std::uint64_t(field[1]) << 8) | std::uint64_t(field[2]);
            raster.width = (std::uint64_t(field[3]) << 8) | std::uint64_t(field[4]);
            raster.channels = std::uint64_t(field[5]);
            const bool huffman = marker <= 0xC7;
            const std::uint64_t blocks = ((raster.width + 7) / 8) * ((raster.height + 7) / 8);
            raster.least_coded_bytes = huffman ? blocks / 8 : 0;
            raster.coded_bytes = bytes.size() - at;
            return raster;
        }
        at += length;
    }
}

std::uint32_t little_endian_32(const unsigned char* p) {
    return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

// BMP: the info header. Uncompressed rows are stored whole, each padded to 4 bytes, so the file
// must hold them all after the pixel data offset. (Run-length coded rows may end early: only the
// size limit applies to them.) The channels are what OpenCV decodes to at most.
std::optional<DeclaredRaster> bmp_header(const std::string& head, std::uint64_t file_size) {
    if (head.size() < 26 || head.compare(0, 2, "BM") != 0) return std::nullopt;
    const auto* p = reinterpret_cast<const unsigned char*>(head.data());
    const std::uint32_t data_offset = little_endian_32(p + 10);
    const std::uint32_t info_size = little_endian_32(p + 14);
    DeclaredRaster raster;
    raster.format = "BMP";
    unsigned bits = 0;
    std::uint32_t compression = 0;
    if (info_size == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit sizes
        raster.width = std::uint64_t{p[18]} | (std::uint64_t{p[19]} << 8);
        raster.height = std::uint64_t{p[20]} | (std::uint64_t{p[21]} << 8);
        bits = p[24] | (p[25] << 8);
    } else if (info_size >= 40 && head.size() >= 34) {
        const auto width = static_cast<std::int32_t>(little_endian_32(p + 18));
        const auto height = static_cast<std::int32_t>(little_endian_32(p + 22));  // negative: top-down rows
        if (width < 0) return std::nullopt;  // left to the decoder to refuse
        raster.width = static_cast<std::uint64_t>(width);
        raster.height = static_cast<std::uint64_t>(std::abs(static_cast<std::int64_t>(height)));
        bits = p[28] | (p[29] << 8);
        compression = little_endian_32(p + 30);
    } else {
        return std::nullopt;
    }
    raster.channels = bits == 32 ? 4 : 3;
    const bool rows_stored_whole = compression == 0 || compression == 3 || compression == 6;  // RGB, (alpha) bit fields
    if (rows_stored_whole && bits != 0 && bits <= 32) {
        const std::uint64_t row_bytes = (raster.width * bits + 31) / 32 * 4;  // width < 2^31: no overflow
        const unsigned __int128 pixel_bytes = static_cast<unsigned __int128>(row_bytes) * raster.height;
        raster.least_coded_bytes = static_cast<std::uint64_t>(std::min<unsigned __int128>(pixel_bytes, UINT64_MAX));
        raster.coded_bytes = file_size > data_offset ? file_size - data_offset : 0;
    }
    return raster;
}

// OpenCV picks a decoder by the content, not the name: a ".png" holding a DICOM stream goes to GDCM,
// which trusts the lengths it declares. A file named as one of the formats with a signature must
// start with it.
void require_signature_of_extension(const fs::path& file, std::span<const std::uint8_t> head) {
    const FormatHandler& format = format_for_path(file);
    if (format.sniff && !format.sniff(head)) {
        throw FileError(file, "named " + file.extension().string() + " but does not start with the " + std::string(format.name) +
                                  " signature");
    }
}

// What an image read here reports as its format: the file's extension, as OpenCV's reader reports it.
std::string file_format_name(const fs::path& file) {
    std::string extension = lowercase_filename(file.extension());
    if (!extension.empty()) extension.erase(0, 1);
    return extension;
}

}  // namespace

Image read_raster_checked(const fs::path& file, const ReadOptions& options) {
    std::error_code error;
    const std::uint64_t file_size = fs::file_size(file, error);
    if (error) throw FileError(file, "cannot read its size: " + error.message());
    std::string head(65536, '\0');
    {
        std::ifstream in(file, std::ios::binary);
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<std::size_t>(in.gcount()));
    }
    const std::span head_bytes(reinterpret_cast<const std::uint8_t*>(head.data()), head.size());
    require_signature_of_extension(file, head_bytes);
    FileBytes file_bytes(file, head, file_size);
    auto declared = png_header(head, file_size);
    if (!declared) declared = jpeg_header(file_bytes);
    if (!declared) declared = bmp_header(head, file_size);
    if (declared) {
        const std::string shape = std::to_string(declared->width) + "x" + std::to_string(declared->height);
        if (declared->width == 0 || declared->height == 0) throw FileError(file, "the " + declared->format + " header declares an empty image (" + shape + ")");
        // (Sizes up to 2^32 each: the product can pass 2^64.)
        const unsigned __int128 values = static_cast<unsigned __int128>(declared->width) * declared->height *
                                         std::max<std::uint64_t>(declared->channels, 1);
        const std::string what = "a " + shape + " " + declared->format + " with " + std::to_string(declared->channels) + " channels";
        if (values > UINT64_MAX) throw FileError(file, what + " holds more than 2^64 values");
        check_memory_budget(file, what, static_cast<std::uint64_t>(values), declared->value_bytes, options.memory);
        if (declared->coded_bytes < declared->least_coded_bytes) {
            throw FileError(file, "truncated: a " + shape + " " + declared->format + " needs at least " +
                                      std::to_string(declared->least_coded_bytes) + " bytes of coded data, the file holds " +
                                      std::to_string(declared->coded_bytes));
        }
    }
    // OpenCV's own limit, in pixels, for the other formats: the budget over the bytes of an 8-bit
    // RGBA pixel. Read once, when its first decoder runs.
    const MemoryBudget& budget = options.memory;
    std::uint64_t pixels = budget.max_bytes == 0 ? std::uint64_t{1} << 62 : std::max<std::uint64_t>(budget.max_bytes / 4, 1);
    if (budget.max_values != 0) pixels = std::min(pixels, budget.max_values);
    const std::string limit = std::to_string(pixels);
    ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", limit.c_str(), 0);
    // gridwarp's own decoder of the format whose signature the file carries, if it takes the file.
    std::optional<Image> native;
    for (const FormatHandler& format : format_table()) {
        if (format.decode && format.sniff && format.sniff(head_bytes)) {
            native = format.decode(file, options, head, file_size);
            break;
        }
    }
    Image image;
    const bool native_decoder = native.has_value();
    if (native) {
        image = std::move(*native);
        image.format = file_format_name(file);
    } else {
        const std::string messages = capture_stderr([&] { throw_if_failed(raster_backend().read(file, image)); });
        if (!messages.empty()) throw FileError(file, "the image decoder reported: " + first_message_line(messages));
    }
    // A TIFF's orientation is its page's tag, which gridwarp's reader has already taken.
    if (!has_tiff_signature(head_bytes)) {
        image.exif_orientation = read_exif_orientation(file);
    } else if (!native_decoder) {
        image.exif_orientation = read_tiff_orientation(file);
    }
    // OpenCV's TIFF decoder turns 8-bit TIFFs by their orientation itself; other formats it reads as stored.
    const bool decoder_turned = !native_decoder && (image.format == "tif" || image.format == "tiff");
    if (!options.keep_orientation && !decoder_turned) apply_exif_orientation(image, image.exif_orientation);
    return image;
}

Image read_itk_volume(const fs::path& file, const ReadOptions& options, bool with_pixels) {
    const DeclaredVolume declared = check_volume_file(file, options);
    if (with_pixels) {
        if (declared.encoding == DataEncoding::Deflate || declared.encoding == DataEncoding::Bzip2) {
            check_memory_budget(file, "decoding " + std::to_string(declared.values) + " compressed values of " +
                                          std::to_string(declared.component_bytes) + " bytes",
                                declared.values, declared.component_bytes, options.memory);
        }
        check_volume_data_inflates(declared, file);
    }
    Image image;
    const std::string messages = capture_stderr([&] { throw_if_failed(itk_backend().read_volume(file, with_pixels, image)); });
    if (!messages.empty()) throw FileError(file, "ITK's reader reported: " + first_message_line(messages));
    return image;
}

namespace {

// Whether `path` lies inside `folder` (both made canonical, so "..", and symbolic links that lead
// out, count as outside).
bool inside_folder(const fs::path& path, const fs::path& folder) {
    std::error_code error;
    const fs::path real_folder = fs::weakly_canonical(folder, error);
    if (error) return false;
    const fs::path real_path = fs::weakly_canonical(path, error);
    if (error) return false;
    auto f = real_folder.begin(), p = real_path.begin();
    for (; f != real_folder.end(); ++f, ++p) {
        if (f->empty()) continue;  // a trailing separator
        if (p == real_path.end() || *p != *f) return false;
    }
    return true;
}

}  // namespace

void require_companion_inside(const fs::path& named, const fs::path& companion, const std::string& role,
                              const ReadOptions& options) {
    const fs::path folder = named.parent_path().empty() ? fs::path(".") : named.parent_path();
    const std::string its = "its " + role + " " + companion.string();
    if (!options.allow_outside_data_files && !inside_folder(companion, folder)) {
        const std::string whose = role == "header" ? "the data file's" : "the header's";
        throw FileError(named, its + " lies outside " + whose + " folder (--allow-outside-data-files allows it)");
    }
    std::error_code error;
    const auto status = fs::status(companion, error);
    if (!fs::exists(status)) throw FileError(named, its + " does not exist");
    if (!fs::is_regular_file(status)) throw FileError(named, its + " is not a regular file");
}

namespace {

// The cause a failing storage call left in errno, if it is one.
std::optional<std::string> storage_error(int saved_errno) {
    switch (saved_errno) {
        case ENOSPC: case EDQUOT: case EROFS: case EIO: case EFBIG: return std::string(std::strerror(saved_errno));
        default: return std::nullopt;
    }
}

// Why a third-party writer failed when the storage is the cause: the errno its failing call left
// when that is a storage error, else a file system found full or read-only after the failure.
std::optional<std::string> storage_failure(const fs::path& written, int saved_errno) {
    if (auto cause = storage_error(saved_errno)) return cause;
    const fs::path folder = written.parent_path().empty() ? fs::path(".") : written.parent_path();
    struct statvfs stats {};
    if (::statvfs(folder.c_str(), &stats) != 0) return std::nullopt;
    if (stats.f_flag & ST_RDONLY) return std::string(std::strerror(EROFS));
    if (stats.f_bavail == 0) return std::string(std::strerror(ENOSPC));
    return std::nullopt;
}

}  // namespace

void write_reporting_failures(const StagedFile& staged, const std::function<void()>& write) {
    std::string messages;
    try {
        errno = 0;
        messages = capture_stderr(write);
    } catch (const FileError&) {
        if (const auto cause = storage_failure(staged.file, errno)) throw FileError(staged.target, "write failed: " + *cause);
        throw;
    }
    // A writer that ignores a failed write or close (ITK's MetaImage and NRRD writers do) still
    // leaves the storage error in errno.
    const int saved_errno = errno;
    if (messages.empty()) {
        if (const auto cause = storage_error(saved_errno)) throw FileError(staged.target, "write failed: " + *cause);
        return;
    }
    if (const auto cause = storage_failure(staged.file, saved_errno)) throw FileError(staged.target, "write failed: " + *cause);
    throw FileError(staged.target, "write failed: " + first_message_line(messages));
}

}  // namespace gridwarp::io::detail
