#include "formats/volume_header_check.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>

#include <zlib.h>

#include "files/file_checks.hpp"
#include "formats/gzip.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::vector<std::string_view> words(std::string_view text) {
    std::vector<std::string_view> result;
    std::size_t at = 0;
    while (at < text.size()) {
        const auto start = text.find_first_not_of(" \t\r", at);
        if (start == std::string_view::npos) break;
        const auto end = std::min(text.find_first_of(" \t\r", start), text.size());
        result.push_back(text.substr(start, end - start));
        at = end;
    }
    return result;
}

std::string shown(std::string_view text) {
    constexpr std::size_t shown = 60;
    std::string result = "'" + std::string(text.substr(0, shown)) + (text.size() > shown ? "...'" : "'");
    for (char& c : result) {
        if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    return result;
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::optional<double> parse_real(std::string_view text) {
    if (text.empty() || text.size() > 64) return std::nullopt;
    const std::string copy(text);
    char* end = nullptr;
    const double value = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size()) return std::nullopt;
    return value;
}

// Header lines with their numbers, each checked for length and for bytes no header holds.
class HeaderLines {
public:
    HeaderLines(std::string_view text, const fs::path& file) : text_(text), file_(file) {}

    bool next(std::string_view& line) {
        if (at_ >= text_.size()) return false;
        const auto end = std::min(text_.find('\n', at_), text_.size());
        line = text_.substr(at_, end - at_);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        at_ = end + 1;
        ++number_;
        if (line.size() > kMaxHeaderLineBytes) {
            throw FileError(file_, "header line " + std::to_string(number_) + " is " + std::to_string(line.size()) +
                                       " bytes long, expected at most " + std::to_string(kMaxHeaderLineBytes));
        }
        if (line.find('\0') != std::string_view::npos) {
            throw FileError(file_, "header line " + std::to_string(number_) + " holds a NUL byte (binary data inside the header?)");
        }
        return true;
    }

private:
    std::string_view text_;
    const fs::path& file_;
    std::size_t at_ = 0;
    std::size_t number_ = 0;
};

class VolumeChecker {
public:
    VolumeChecker(const fs::path& file, std::string format) : file_(file) { volume_.format = std::move(format); }

    [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
        throw FileError(file_, "header field '" + field + "': " + problem);
    }

    std::uint64_t positive_integer(const std::string& field, std::string_view text) const {
        const auto value = parse_integer(text);
        if (!value || *value < 1) fail(field, "expected a positive integer, found " + shown(text));
        return static_cast<std::uint64_t>(*value);
    }

    // A count of axes: 1 to 16 (NRRD's own limit, and more than any image gridwarp reads).
    std::size_t axis_count(const std::string& field, std::string_view text) const {
        const std::uint64_t count = positive_integer(field, text);
        if (count > 16) fail(field, "expected 1 to 16 axes, found " + std::to_string(count));
        return static_cast<std::size_t>(count);
    }

    double finite_real(const std::string& field, std::string_view text) const {
        const auto value = parse_real(text);
        if (!value) fail(field, "expected a number, found " + shown(text));
        if (!std::isfinite(*value)) fail(field, "expected a finite number, found " + shown(text));
        if (std::abs(*value) > kMaxGeometryMagnitude) fail(field, "expected magnitudes below 1e10, found " + shown(text));
        return *value;
    }

    void set_sizes(const std::string& field, const std::vector<std::string_view>& items, std::size_t expected) {
        if (items.size() != expected) {
            fail(field, "expected " + std::to_string(expected) + " sizes (one per axis), found " + std::to_string(items.size()));
        }
        volume_.sizes.clear();
        for (const auto item : items) volume_.sizes.push_back(positive_integer(field, item));
    }

    // Spacings: finite and non-zero (NaN is NRRD's "no spacing" for a non-spatial axis).
    void check_spacings(const std::string& field, const std::vector<std::string_view>& items, bool nan_allowed) const {
        for (const auto item : items) {
            const auto value = parse_real(item);
            if (!value) fail(field, "expected numbers, found " + shown(item));
            if (nan_allowed && std::isnan(*value)) continue;
            if (!std::isfinite(*value) || *value == 0.0 || std::abs(*value) > kMaxGeometryMagnitude) {
                fail(field, "expected finite, non-zero spacings below 1e10, found " + shown(item));
            }
        }
    }

    // The axes' direction vectors must be finite and span as many dimensions as there are vectors:
    // a singular direction matrix has no inverse, and ITK would divide by zero resampling with it.
    void check_directions(const std::string& field, const std::vector<std::vector<double>>& vectors) const {
        const std::size_t count = vectors.size();
        if (count == 0) return;
        // Gram-Schmidt on copies; a vector with (almost) nothing left is dependent on the others.
        std::vector<std::vector<double>> basis;
        for (const auto& vector : vectors) {
            double norm = 0;
            for (double v : vector) norm += v * v;
            norm = std::sqrt(norm);
            if (!(norm > 0) || !std::isfinite(norm)) fail(field, "a direction vector is zero or not finite");
            std::vector<double> rest(vector.size());
            for (std::size_t i = 0; i < vector.size(); ++i) rest[i] = vector[i] / norm;
            for (const auto& b : basis) {
                double dot = 0;
                for (std::size_t i = 0; i < rest.size(); ++i) dot += rest[i] * b[i];
                for (std::size_t i = 0; i < rest.size(); ++i) rest[i] -= dot * b[i];
            }
            double left = 0;
            for (double v : rest) left += v * v;
            left = std::sqrt(left);
            if (left < 1e-6) fail(field, "the direction vectors are linearly dependent: the direction matrix is singular");
            for (double& v : rest) v /= left;
            basis.push_back(std::move(rest));
        }
    }

    // Data files named by the header: a single name, or a numbered pattern "FORMAT MIN MAX STEP".
    void add_data_file(std::string_view name) {
        if (name.empty()) fail(data_file_field_, "expected a data file name, found nothing");
        volume_.data_files.push_back({file_.parent_path() / fs::path(std::string(name)), 0});
    }

    // A printf pattern with exactly one integer conversion (flags and width allowed), expanded for
    // MIN, MIN + STEP, ... up to MAX: refused when the count is not what the sizes allow.
    void add_numbered_data_files(std::string_view pattern, std::string_view min_text, std::string_view max_text,
                                 std::string_view step_text, std::uint64_t most) {
        const auto min = parse_integer(min_text), max = parse_integer(max_text), step = parse_integer(step_text);
        if (!min || !max || !step || *step == 0) {
            fail(data_file_field_, "expected FORMAT MIN MAX STEP with integers and a non-zero step, found " +
                                       shown(std::string(pattern) + " " + std::string(min_text) + " " +
                                              std::string(max_text) + " " + std::string(step_text)));
        }
        if ((*max - *min) / *step < 0) fail(data_file_field_, "the numbered data files run from MIN away from MAX");
        const std::uint64_t count = static_cast<std::uint64_t>((*max - *min) / *step) + 1;
        if (count > most || count > kMaxDataFiles) {
            fail(data_file_field_, "names " + std::to_string(count) + " numbered data files, expected at most " +
                                       std::to_string(std::min<std::uint64_t>(most, kMaxDataFiles)) + " (one per slice)");
        }
        int conversions = 0;
        for (std::size_t i = 0; i < pattern.size(); ++i) {
            if (pattern[i] != '%') continue;
            if (i + 1 < pattern.size() && pattern[i + 1] == '%') {
                ++i;
                continue;
            }
            std::size_t j = i + 1;
            while (j < pattern.size() && (std::isdigit(static_cast<unsigned char>(pattern[j])) || pattern[j] == '0' ||
                                          pattern[j] == '-' || pattern[j] == '+' || pattern[j] == ' ')) {
                ++j;
            }
            if (j >= pattern.size() || (pattern[j] != 'd' && pattern[j] != 'i' && pattern[j] != 'u') || j - i > 4) {
                fail(data_file_field_, "expected a file name pattern with one integer conversion such as %03d, found " + shown(pattern));
            }
            ++conversions;
            i = j;
        }
        if (conversions != 1) {
            fail(data_file_field_, "expected a file name pattern with one integer conversion such as %03d, found " + shown(pattern));
        }
        const std::string format(pattern);
        for (std::uint64_t k = 0; k < count; ++k) {
            const long long number = *min + static_cast<long long>(k) * *step;
            char name[kMaxHeaderLineBytes + 32];
            std::snprintf(name, sizeof name, format.c_str(), number);
            add_data_file(name);
        }
    }

    void set_data_file_field(std::string field) { data_file_field_ = std::move(field); }

    // The product of the sizes and channels, refused past 2^62 bytes of voxels.
    void finish(std::uint64_t channels) {
        if (volume_.sizes.empty()) fail(size_field_, "missing: the header declares no sizes");
        if (volume_.component_bytes == 0) fail(type_field_, "missing: the header declares no voxel type");
        std::uint64_t values = channels;
        const std::uint64_t limit = (std::uint64_t{1} << 62) / volume_.component_bytes;
        for (const std::uint64_t size : volume_.sizes) {
            if (size > limit || values > limit / size) {
                fail(size_field_, "the sizes multiply to more than 2^62 bytes of voxels");
            }
            values *= size;
        }
        volume_.values = values;
    }

    void set_field_names(std::string sizes, std::string type) {
        size_field_ = std::move(sizes);
        type_field_ = std::move(type);
    }

    DeclaredVolume& volume() { return volume_; }
    const fs::path& file() const { return file_; }

private:
    const fs::path& file_;
    DeclaredVolume volume_;
    std::string data_file_field_ = "data file";
    std::string size_field_ = "sizes";
    std::string type_field_ = "type";
};

std::uint64_t nrrd_type_bytes(const std::string& type) {
    static const std::vector<std::pair<std::vector<std::string>, std::uint64_t>> types = {
        {{"signed char", "int8", "int8_t", "uchar", "unsigned char", "uint8", "uint8_t"}, 1},
        {{"short", "short int", "signed short", "signed short int", "int16", "int16_t", "ushort", "unsigned short",
          "unsigned short int", "uint16", "uint16_t"}, 2},
        {{"int", "signed int", "int32", "int32_t", "uint", "unsigned int", "uint32", "uint32_t", "float"}, 4},
        {{"longlong", "long long", "long long int", "signed long long", "signed long long int", "int64", "int64_t",
          "ulonglong", "unsigned long long", "unsigned long long int", "uint64", "uint64_t", "double"}, 8},
    };
    for (const auto& [names, bytes] : types) {
        if (std::find(names.begin(), names.end(), type) != names.end()) return bytes;
    }
    return 0;
}

// The entries of a NRRD vector list: "(a,b,c)" (spaces allowed inside) or "none".
std::vector<std::string_view> vector_entries(std::string_view text) {
    std::vector<std::string_view> result;
    std::size_t at = 0;
    while (true) {
        at = text.find_first_not_of(" \t", at);
        if (at == std::string_view::npos) break;
        const auto end = text[at] == '(' ? text.find(')', at) : text.find_first_of(" \t", at);
        const auto stop = end == std::string_view::npos ? text.size() : text[at] == '(' ? end + 1 : end;
        result.push_back(text.substr(at, stop - at));
        at = stop;
    }
    return result;
}

// A NRRD vector "(a,b,c)" of `dimension` finite numbers.
std::vector<double> nrrd_vector(VolumeChecker& checker, const std::string& field, std::string_view text, std::size_t dimension) {
    text = trim(text);
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') checker.fail(field, "expected a vector (x,y,z), found " + shown(text));
    text = text.substr(1, text.size() - 2);
    std::vector<double> values;
    std::size_t at = 0;
    while (true) {
        const auto comma = std::min(text.find(',', at), text.size());
        values.push_back(checker.finite_real(field, trim(text.substr(at, comma - at))));
        if (comma >= text.size()) break;
        at = comma + 1;
    }
    if (dimension != 0 && values.size() != dimension) {
        checker.fail(field, "expected vectors of " + std::to_string(dimension) + " components (the space dimension), found " +
                                std::to_string(values.size()));
    }
    return values;
}

std::size_t nrrd_space_dimension(std::string_view space) {
    const std::string name = lowercase(trim(space));
    for (const char* three : {"right-anterior-superior", "ras", "left-anterior-superior", "las", "left-posterior-superior",
                              "lps", "scanner-xyz", "3d-right-handed", "3d-left-handed"}) {
        if (name == three) return 3;
    }
    for (const char* four : {"right-anterior-superior-time", "ras-time", "left-anterior-superior-time", "las-time",
                             "left-posterior-superior-time", "lps-time", "scanner-xyz-time", "3d-right-handed-time",
                             "3d-left-handed-time"}) {
        if (name == four) return 4;
    }
    return 0;
}

DeclaredVolume parse_nrrd(std::string_view header, std::uint64_t header_end, const fs::path& file) {
    VolumeChecker checker(file, "nrrd");
    HeaderLines lines(header, file);
    std::string_view line;
    if (!lines.next(line) || line.size() != 8 || line.substr(0, 7) != "NRRD000" || line[7] < '1' || line[7] > '5') {
        throw FileError(file, "not a NRRD file: expected the magic NRRD0001..NRRD0005 on the first line, found " + shown(line));
    }
    std::size_t dimension = 0;
    std::size_t space_dimension = 0;
    std::int64_t byte_skip = 0;
    std::optional<std::string> encoding;
    std::vector<std::string_view> data_file_words;
    bool data_file_list = false;
    bool header_ended = false;
    while (lines.next(line)) {
        if (line.empty()) {
            header_ended = true;
            break;
        }
        if (line.front() == '#') continue;
        if (line.find(":=") != std::string_view::npos) continue;  // a key/value pair: ITK keeps it as metadata
        const auto colon = line.find(": ");
        if (colon == std::string_view::npos) throw FileError(file, "not a NRRD header line: " + shown(line));
        const std::string field = lowercase(line.substr(0, colon));
        const std::string_view value = trim(line.substr(colon + 2));
        const auto items = words(value);
        auto need_dimension = [&] {
            if (dimension == 0) checker.fail(field, "comes before 'dimension'");
        };
        if (field == "dimension") {
            dimension = checker.axis_count(field, value);
        } else if (field == "type") {
            checker.volume().component_bytes = nrrd_type_bytes(lowercase(value));
            if (checker.volume().component_bytes == 0) {
                checker.fail(field, "expected a scalar type (int8 ... uint64, float, double), found " + shown(value));
            }
        } else if (field == "sizes") {
            need_dimension();
            checker.set_sizes(field, items, dimension);
        } else if (field == "encoding") {
            const std::string name = lowercase(value);
            if (name == "raw") checker.volume().encoding = DataEncoding::Raw;
            else if (name == "gz" || name == "gzip") checker.volume().encoding = DataEncoding::Deflate;
            else if (name == "bz2" || name == "bzip2") checker.volume().encoding = DataEncoding::Bzip2;
            else if (name == "txt" || name == "text" || name == "ascii") checker.volume().encoding = DataEncoding::Text;
            else if (name == "hex") checker.volume().encoding = DataEncoding::Hex;
            else checker.fail(field, "expected raw, gzip, bzip2, ascii or hex, found " + shown(value));
            encoding = name;
        } else if (field == "space") {
            space_dimension = nrrd_space_dimension(value);
            if (space_dimension == 0) checker.fail(field, "expected a known space (RAS, LPS, scanner-xyz, ...), found " + shown(value));
        } else if (field == "space dimension") {
            space_dimension = checker.axis_count(field, value);
        } else if (field == "spacings") {
            need_dimension();
            if (items.size() != dimension) checker.fail(field, "expected " + std::to_string(dimension) + " spacings, found " + std::to_string(items.size()));
            checker.check_spacings(field, items, true);
        } else if (field == "space directions") {
            need_dimension();
            if (space_dimension == 0) checker.fail(field, "comes before 'space' or 'space dimension'");
            const auto entries = vector_entries(value);
            if (entries.size() != dimension) checker.fail(field, "expected " + std::to_string(dimension) + " entries, found " + std::to_string(entries.size()));
            std::vector<std::vector<double>> vectors;
            for (const auto item : entries) {
                if (lowercase(item) == "none") continue;
                vectors.push_back(nrrd_vector(checker, field, item, space_dimension));
            }
            checker.check_directions(field, vectors);
        } else if (field == "space origin") {
            if (space_dimension == 0) checker.fail(field, "comes before 'space' or 'space dimension'");
            nrrd_vector(checker, field, value, space_dimension);
        } else if (field == "byte skip" || field == "byteskip") {
            const auto skip = parse_integer(value);
            if (!skip || *skip < -1) checker.fail(field, "expected -1 or a byte count, found " + shown(value));
            byte_skip = *skip;
        } else if (field == "line skip" || field == "lineskip") {
            const auto skip = parse_integer(value);
            if (!skip || *skip < 0) checker.fail(field, "expected a line count, found " + shown(value));
        } else if (field == "data file" || field == "datafile") {
            checker.set_data_file_field(field);
            data_file_words = items;
            if (items.empty()) checker.fail(field, "expected a file name, found nothing");
            data_file_list = items[0] == "LIST" && items.size() <= 2;
            if (data_file_list) break;  // the names follow, one a line
            if (items.size() < 4) data_file_words = {value};  // one name, which may hold spaces
        }
    }
    if (dimension == 0) throw FileError(file, "header field 'dimension': missing");
    if (!encoding) throw FileError(file, "header field 'encoding': missing");
    checker.finish(1);
    DeclaredVolume& volume = checker.volume();
    if (byte_skip == -1 && volume.encoding != DataEncoding::Raw) {
        checker.fail("byte skip", "-1 (data at the end of the file) needs raw encoding");
    }
    // The slowest axis bounds how many files the data can be split into.
    const std::uint64_t most_files = volume.sizes.back();
    if (data_file_words.empty()) {
        if (!header_ended) throw FileError(file, "the NRRD header has no blank line before its data and names no data file");
        volume.data_files.push_back({file, byte_skip == -1 ? -1 : static_cast<std::int64_t>(header_end) + byte_skip});
    } else if (data_file_list) {
        // The names follow the header, one a line.
        while (lines.next(line)) {
            if (!trim(line).empty()) checker.add_data_file(trim(line));
            if (volume.data_files.size() > std::min(most_files, kMaxDataFiles)) {
                checker.fail("data file", "lists more data files than the slowest axis has slices");
            }
        }
        if (volume.data_files.empty()) checker.fail("data file", "LIST names no files");
    } else if (data_file_words.size() >= 4) {
        checker.add_numbered_data_files(data_file_words[0], data_file_words[1], data_file_words[2], data_file_words[3], most_files);
    } else {
        checker.add_data_file(data_file_words[0]);
    }
    if (!data_file_words.empty()) {
        for (auto& data : volume.data_files) data.offset = byte_skip;
    }
    return volume;
}

std::uint64_t metaimage_type_bytes(std::string type) {
    if (type.size() > 6 && type.compare(type.size() - 6, 6, "_ARRAY") == 0) type.resize(type.size() - 6);
    if (type == "MET_UCHAR" || type == "MET_CHAR") return 1;
    if (type == "MET_USHORT" || type == "MET_SHORT") return 2;
    // MET_LONG/ULONG are 4 bytes in MetaIO (its _LONG_LONG are 8).
    if (type == "MET_UINT" || type == "MET_INT" || type == "MET_ULONG" || type == "MET_LONG" || type == "MET_FLOAT") return 4;
    if (type == "MET_ULONG_LONG" || type == "MET_LONG_LONG" || type == "MET_DOUBLE") return 8;
    return 0;
}

DeclaredVolume parse_metaimage(std::string_view header, std::uint64_t header_end, const fs::path& file) {
    VolumeChecker checker(file, "metaimage");
    checker.set_field_names("DimSize", "ElementType");
    HeaderLines lines(header, file);
    std::string_view line;
    std::size_t dimension = 0;
    std::uint64_t channels = 1;
    std::int64_t header_size = 0;
    bool compressed = false;
    bool binary = true;
    std::optional<std::string_view> data_file;
    while (!data_file && lines.next(line)) {
        if (trim(line).empty() || trim(line).front() == '#') continue;
        const auto equals = line.find('=');
        if (equals == std::string_view::npos) throw FileError(file, "not a MetaImage header line (expected Key = Value): " + shown(line));
        const std::string key(trim(line.substr(0, equals)));
        const std::string_view value = trim(line.substr(equals + 1));
        const auto items = words(value);
        auto need_dimension = [&] {
            if (dimension == 0) checker.fail(key, "comes before NDims");
        };
        auto need_count = [&](std::size_t count) {
            if (items.size() != count) {
                checker.fail(key, "expected " + std::to_string(count) + " values, found " + std::to_string(items.size()));
            }
        };
        if (key == "ObjectType") {
            if (lowercase(value) != "image") checker.fail(key, "expected Image, found " + shown(value));
        } else if (key == "NDims") {
            dimension = checker.axis_count(key, value);
        } else if (key == "DimSize") {
            need_dimension();
            checker.set_sizes(key, items, dimension);
        } else if (key == "ElementNumberOfChannels") {
            channels = checker.positive_integer(key, value);
            if (channels > 4096) checker.fail(key, "expected at most 4096 channels, found " + shown(value));
        } else if (key == "ElementType") {
            checker.volume().component_bytes = metaimage_type_bytes(std::string(value));
            if (checker.volume().component_bytes == 0) {
                checker.fail(key, "expected a numeric type (MET_UCHAR ... MET_DOUBLE), found " + shown(value));
            }
        } else if (key == "HeaderSize") {
            const auto size = parse_integer(value);
            if (!size || *size < -1) checker.fail(key, "expected -1 or a byte count, found " + shown(value));
            header_size = *size;
        } else if (key == "ElementSpacing" || key == "ElementSize") {
            need_dimension();
            need_count(dimension);
            checker.check_spacings(key, items, false);
        } else if (key == "Offset" || key == "Position" || key == "Origin" || key == "CenterOfRotation") {
            need_dimension();
            need_count(dimension);
            for (const auto item : items) checker.finite_real(key, item);
        } else if (key == "TransformMatrix" || key == "Rotation" || key == "Orientation") {
            need_dimension();
            need_count(dimension * dimension);
            std::vector<std::vector<double>> columns(dimension, std::vector<double>(dimension));
            for (std::size_t i = 0; i < items.size(); ++i) columns[i / dimension][i % dimension] = checker.finite_real(key, items[i]);
            checker.check_directions(key, columns);
        } else if (key == "CompressedDataSize") {
            const auto size = parse_integer(value);
            if (!size || *size < 0) checker.fail(key, "expected a byte count, found " + shown(value));
            checker.volume().compressed_bytes = *size;
        } else if (key == "CompressedData") {
            compressed = lowercase(value) == "true";
        } else if (key == "BinaryData") {
            binary = lowercase(value) != "false";
        } else if (key == "ElementDataFile") {
            data_file = value;
        }
    }
    if (dimension == 0) throw FileError(file, "header field 'NDims': missing");
    if (!data_file) throw FileError(file, "header field 'ElementDataFile': missing (it ends a MetaImage header)");
    checker.finish(channels);
    DeclaredVolume& volume = checker.volume();
    volume.encoding = compressed ? DataEncoding::Deflate : binary ? DataEncoding::Raw : DataEncoding::Text;
    if (header_size == -1 && compressed) checker.fail("HeaderSize", "-1 (data at the end of the file) needs uncompressed data");
    const auto items = words(*data_file);
    checker.set_data_file_field("ElementDataFile");
    const std::uint64_t most_files = volume.sizes.back();
    if (lowercase(*data_file) == "local") {
        volume.data_files.push_back({file, header_size == -1 ? -1 : static_cast<std::int64_t>(header_end)});
        return volume;
    }
    if (!items.empty() && items[0] == "LIST") {
        while (lines.next(line)) {
            if (!trim(line).empty()) checker.add_data_file(trim(line));
            if (volume.data_files.size() > std::min(most_files, kMaxDataFiles)) {
                checker.fail("ElementDataFile", "lists more data files than the slowest axis has slices");
            }
        }
        if (volume.data_files.empty()) checker.fail("ElementDataFile", "LIST names no files");
    } else if (items.size() == 4 && data_file->find('%') != std::string_view::npos) {
        checker.add_numbered_data_files(items[0], items[1], items[2], items[3], most_files);
    } else {
        checker.add_data_file(*data_file);
    }
    for (auto& data : volume.data_files) data.offset = header_size;
    return volume;
}

std::string describe_bytes(std::uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace

DeclaredVolume parse_volume_header(std::string_view header, std::uint64_t header_end, const fs::path& file) {
    const std::string name = lowercase_filename(file);
    if (ends_with(name, ".nrrd") || ends_with(name, ".nhdr")) return parse_nrrd(header, header_end, file);
    return parse_metaimage(header, header_end, file);
}

DeclaredVolume check_volume_file(const fs::path& file, const ReadOptions& options) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw FileError(file, "cannot open for reading");
    const std::string name = lowercase_filename(file);
    const bool nrrd = ends_with(name, ".nrrd") || ends_with(name, ".nhdr");
    // The header text: up to NRRD's blank line, or through MetaImage's ElementDataFile line (its
    // last); a detached header is the whole file.
    std::string header;
    std::string line;
    bool ended = false;
    while (header.size() < kMaxHeaderBytes && std::getline(in, line)) {
        header += line;
        header += '\n';
        if (line.size() > kMaxHeaderLineBytes) break;  // parse_volume_header names the line
        const std::string_view text = trim(line);
        if (nrrd ? text.empty() && header.size() > 1 : text.rfind("ElementDataFile", 0) == 0) {
            // MetaImage LISTs continue with file names; NRRD data follows the blank line.
            if (nrrd || ends_with(name, ".mha") || text.find("LIST") == std::string_view::npos) {
                ended = true;
                break;
            }
        }
    }
    if (!ended && header.size() >= kMaxHeaderBytes) {
        throw FileError(file, "the header runs past " + std::to_string(kMaxHeaderBytes) + " bytes without ending");
    }
    const std::uint64_t header_end = header.size();
    DeclaredVolume volume = parse_volume_header(header, header_end, file);

    const std::uint64_t total_bytes = volume.values * volume.component_bytes;
    const std::uint64_t files = volume.data_files.size();
    if (total_bytes % files != 0) {
        throw FileError(file, "its " + describe_bytes(total_bytes) + " of voxels do not split evenly over " +
                                  std::to_string(files) + " data files");
    }
    const std::uint64_t bytes_per_file = total_bytes / files;
    const bool compressed = volume.encoding == DataEncoding::Deflate || volume.encoding == DataEncoding::Bzip2;
    for (const auto& data : volume.data_files) {
        if (data.path != file) require_companion_inside(file, data.path, "data file", options);
        std::error_code error;
        const std::uint64_t size = fs::file_size(data.path, error);
        if (error) throw FileError(file, "cannot read the size of its data file " + data.path.string() + ": " + error.message());
        const std::uint64_t offset = data.offset < 0 ? 0 : static_cast<std::uint64_t>(data.offset);
        const std::uint64_t stored = size > offset ? size - offset : 0;
        std::uint64_t needed = 0;  // the fewest stored bytes that can hold bytes_per_file
        switch (volume.encoding) {
            case DataEncoding::Raw: needed = bytes_per_file; break;
            case DataEncoding::Deflate: needed = (bytes_per_file + kMaxDeflateRatio - 1) / kMaxDeflateRatio; break;
            case DataEncoding::Bzip2: needed = 1; break;
            case DataEncoding::Text: needed = 2 * (bytes_per_file / volume.component_bytes) - 1; break;
            case DataEncoding::Hex: needed = 2 * bytes_per_file; break;
        }
        if (volume.compressed_bytes >= 0 && static_cast<std::uint64_t>(volume.compressed_bytes) > stored) {
            throw FileError(file, "truncated: CompressedDataSize is " + std::to_string(volume.compressed_bytes) + " bytes, found " +
                                      describe_bytes(stored));
        }
        if (stored < needed) {
            const std::string where = data.path == file ? "" : " in its data file " + data.path.string();
            throw FileError(file, "truncated: the header declares " + describe_bytes(bytes_per_file) + " of voxels" +
                                      (compressed ? " (compressed)" : "") + where + ", which needs at least " +
                                      describe_bytes(needed) + ", found " + describe_bytes(stored));
        }
    }
    return volume;
}

void check_volume_data_inflates(const DeclaredVolume& volume, const fs::path& file) {
    if (volume.encoding != DataEncoding::Deflate) return;
    const std::uint64_t bytes_per_file = volume.values * volume.component_bytes / volume.data_files.size();
    for (const auto& data : volume.data_files) {
        std::ifstream in(data.path, std::ios::binary);
        in.seekg(data.offset < 0 ? 0 : data.offset);
        z_stream z{};
        if (inflateInit2(&z, 15 + 32) != Z_OK) throw FileError(file, "cannot start decompressing");  // zlib or gzip
        std::vector<unsigned char> input(1 << 16), output(1 << 18);
        std::uint64_t total = 0;
        int status = Z_OK;
        while (status == Z_OK && total < bytes_per_file) {
            if (z.avail_in == 0) {
                in.read(reinterpret_cast<char*>(input.data()), static_cast<std::streamsize>(input.size()));
                z.next_in = input.data();
                z.avail_in = static_cast<uInt>(in.gcount());
                if (z.avail_in == 0) break;
            }
            z.next_out = output.data();
            z.avail_out = static_cast<uInt>(output.size());
            status = inflate(&z, Z_NO_FLUSH);
            total += output.size() - z.avail_out;
        }
        const char* reason = z.msg;
        inflateEnd(&z);
        if (total < bytes_per_file) {
            const std::string where = data.path == file ? "its compressed voxels" : "its data file " + data.path.string();
            throw FileError(file, where + " inflate to " + describe_bytes(total) + ", expected " + describe_bytes(bytes_per_file) +
                                      (status != Z_OK && status != Z_STREAM_END && reason ? std::string(" (") + reason + ")"
                                                                                          : std::string(" (truncated or corrupt)")));
        }
    }
}

std::vector<fs::path> detached_header_files_read(const fs::path& file) {
    const std::string name = lowercase_filename(file);
    if (!ends_with(name, ".nhdr") && !ends_with(name, ".mhd")) return {file};
    std::vector<fs::path> files{file};
    ReadOptions every_data_file;
    every_data_file.allow_outside_data_files = true;
    every_data_file.memory = MemoryBudget{0, 0};
    try {
        for (const auto& data : check_volume_file(file, every_data_file).data_files) {
            if (std::find(files.begin(), files.end(), data.path) == files.end()) files.push_back(data.path);
        }
    } catch (const std::exception&) {
        // Not readable as it is: the read itself will refuse it, naming the problem.
    }
    return files;
}

// What ITK names the data file of a detached header it writes (gridwarp writes them compressed):
// teem's NRRD writer adds its encoding's suffix, MetaIO "zraw" for compressed data.
std::vector<fs::path> detached_header_files_written(const fs::path& file) {
    const std::string name = lowercase_filename(file);
    const std::string filename = file.filename().string();
    if (ends_with(name, ".nhdr")) return {file, file.parent_path() / (filename.substr(0, filename.size() - 5) + ".raw.gz")};
    if (ends_with(name, ".mhd")) return {file, file.parent_path() / (filename.substr(0, filename.size() - 4) + ".zraw")};
    return {file};
}

}  // namespace gridwarp::io::detail
