// MRtrix3 images: a text header ("mrtrix image", then "key: value" lines, then END) and the
// voxels, in one file (.mif), gzipped whole (.mif.gz), or in a data file that a header names
// (.mih). The conventions, from MRtrix3's own reader (core/formats/mrtrix_utils.h):
//  - transform: 3 rows of 4, mapping (voxel index * vox) to scanner RAS: no voxel size in it;
//  - layout: each axis's rank in the file's order (0 fastest) and its sign (a "-" axis is stored
//    from its last index down), so the image's axes are the header's whatever the order on disk;
//  - scaling: "offset,multiplier", value = offset + multiplier * stored.
// Voxels stored in the image's order ("+0,+1,+2[,+3]": x fastest, the volumes slowest) and byte
// order are sampled where they lie in the file; any other layout is rearranged once, on reading.

#include "formats/mif.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "files/file_checks.hpp"
#include "files/mapped_file.hpp"
#include "files/output_file.hpp"
#include "formats/gzip.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

// The codec's own names, in a namespace of their own: lib/io is built as one translation unit.
namespace gridwarp::io::detail::mif {

namespace fs = std::filesystem;

namespace {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kFirstLine = "mrtrix image";
// Headers are a few hundred bytes, a few tens of kilobytes with a long diffusion scheme: the first
// read takes them whole, and one that runs past the second is refused as no image header.
constexpr std::size_t kHeaderFirstRead = std::size_t{64} << 10;
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 20;
// A .mif's voxels start at a multiple of this, so that every element type is aligned where the
// file is mapped (mrconvert's own offsets are multiples of 4).
constexpr std::uint64_t kDataAlignment = 16;
// A compressed file's bytes before the voxels (the header) are inflated with them up to this
// many, as the NIfTI reader does; a longer header is inflated through a small buffer and dropped.
constexpr std::uint64_t kGapInflatedInPlace = std::uint64_t{64} << 10;
// Keys that describe the voxel grid or the volumes of the file they were read from: a .mif output
// keeps them only on that grid (the other key-values hold wherever the voxels go).
constexpr std::array<std::string_view, 5> kGridBoundKeys = {"dw_scheme", "pe_scheme", "PhaseEncodingDirection",
                                                            "SliceEncodingDirection", "SliceTiming"};

enum class MifForm { Single, Gzipped, Detached };  // .mif, .mif.gz, .mih

// The form a name gives a file to be written.
MifForm mif_form(const fs::path& file) {
    const std::string name = lowercase_filename(file);
    if (ends_with(name, ".mif.gz")) return MifForm::Gzipped;
    if (ends_with(name, ".mih")) return MifForm::Detached;
    return MifForm::Single;
}

// The form of a file to be read: a .mif.gz that is not gzipped is read as the .mif it is, as
// MRtrix3 (through zlib) reads it.
MifForm stored_form(const fs::path& file) {
    const MifForm form = mif_form(file);
    return form == MifForm::Gzipped && !has_gzip_magic(MappedFile(file).read_prefix(2)) ? MifForm::Single : form;
}

// ---- The header's text

std::string_view trimmed(std::string_view text) {
    constexpr std::string_view kSpace = " \t\r\f\v";
    const auto first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// A header value as an error message shows it: one line, of bounded length.
std::string shown(std::string_view value) {
    constexpr std::size_t kLongest = 60;
    std::string text;
    for (const char c : value.substr(0, kLongest)) text += (c >= 0x20 && c < 0x7f) ? c : '?';
    return "'" + text + (value.size() > kLongest ? "...'" : "'");
}

std::string sizes_text(const std::vector<std::int64_t>& sizes) {
    std::string text;
    for (const std::int64_t size : sizes) {
        if (!text.empty()) text += ',';
        text += std::to_string(size);
    }
    return text;
}

struct HeaderText {
    KeyValues lines;        // every "key: value" line, in order
    std::uint64_t end = 0;  // the first byte after the END line (or after the text)
};

// The key-value lines of a header as MRtrix3 reads them: '#' starts a comment, lines without a
// colon or key are skipped, END ends the header (or, where `end_optional`, the end of the file: a
// .mih that mrconvert writes has no END line). nullopt when `text`, the first bytes of a longer
// file, stops before the header does.
std::optional<HeaderText> header_lines(std::string_view text, bool whole_file, bool end_optional, const fs::path& file) {
    if (!text.starts_with(kFirstLine)) throw FileError(file, "not an MRtrix3 image: the file does not start with 'mrtrix image'");
    const auto first_end = text.find('\n');
    if (first_end == std::string_view::npos && !whole_file) return std::nullopt;
    HeaderText header;
    std::size_t position = first_end == std::string_view::npos ? text.size() : first_end + 1;
    while (position < text.size()) {
        const auto line_end = text.find('\n', position);
        if (line_end == std::string_view::npos && !whole_file) return std::nullopt;
        const std::size_t stop = line_end == std::string_view::npos ? text.size() : line_end;
        const std::string_view raw = text.substr(position, stop - position);
        position = std::min(stop + 1, text.size());
        // The voxels of a .mif follow its END line: binary bytes mean that it has none.
        if (raw.find('\0') != std::string_view::npos) throw FileError(file, "the header has no END line before its voxels");
        const std::string_view line = trimmed(raw.substr(0, raw.find('#')));
        if (line == "END") {
            header.end = position;
            return header;
        }
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view key = trimmed(line.substr(0, colon));
        if (key.empty()) continue;
        header.lines.emplace_back(std::string(key), std::string(trimmed(line.substr(colon + 1))));
    }
    if (!end_optional) throw FileError(file, "the header has no END line (is the file cut short?)");
    header.end = text.size();
    return header;
}

// The comma-separated entries of a value, each trimmed.
std::vector<std::string_view> entries(std::string_view value) {
    std::vector<std::string_view> list;
    for (std::size_t start = 0;;) {
        const auto comma = value.find(',', start);
        list.push_back(trimmed(value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
        if (comma == std::string_view::npos) return list;
        start = comma + 1;
    }
}

// `entry` whole as a number of type T (a leading '+' allowed), else nullopt.
template <class T>
std::optional<T> number_in(std::string_view entry) {
    if (!entry.empty() && entry.front() == '+') entry.remove_prefix(1);
    T number{};
    const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), number);
    if (entry.empty() || error != std::errc() || end != entry.data() + entry.size()) return std::nullopt;
    return number;
}

// MRtrix3's number lists: an empty entry is NaN (as "nan" is). nullopt where an entry is not a
// number.
std::optional<std::vector<double>> parse_numbers(std::string_view value) {
    std::vector<double> numbers;
    for (const std::string_view entry : entries(value)) {
        const std::optional<double> number = entry.empty() ? std::nan("") : number_in<double>(entry);
        if (!number) return std::nullopt;
        numbers.push_back(*number);
    }
    return numbers;
}

std::optional<std::vector<std::int64_t>> parse_sizes(std::string_view value) {
    std::vector<std::int64_t> sizes;
    for (const std::string_view entry : entries(value)) {
        const std::optional<std::int64_t> size = number_in<std::int64_t>(entry);
        if (!size || *size < 1) return std::nullopt;
        sizes.push_back(*size);
    }
    return sizes;
}

// ---- The header's fields

struct StoredType {
    DType dtype = DType::UInt8;
    bool big_endian = false;
};

// MRtrix3's datatype names, any case; without LE or BE a type is in the writing machine's order,
// which MRtrix3 takes as this machine's (little-endian).
StoredType stored_type(std::string_view value, const fs::path& file) {
    std::string name = lowercase(value);
    bool big_endian = false;
    if (name.starts_with("cfloat")) throw FileError(file, "datatype " + shown(value) + ": complex voxels are not supported");
    if (name == "bit") throw FileError(file, "datatype 'Bit': 1-bit voxels are not supported");
    const bool multibyte = name != "int8" && name != "uint8";
    if (multibyte && (name.ends_with("le") || name.ends_with("be"))) {
        big_endian = name.ends_with("be");
        name.resize(name.size() - 2);
    }
    static constexpr std::pair<std::string_view, DType> kTypes[] = {
        {"int8", DType::Int8},     {"uint8", DType::UInt8},     {"int16", DType::Int16},     {"uint16", DType::UInt16},
        {"int32", DType::Int32},   {"uint32", DType::UInt32},   {"int64", DType::Int64},     {"uint64", DType::UInt64},
        {"float32", DType::Float32}, {"float64", DType::Float64},
    };
    for (const auto& [type_name, dtype] : kTypes) {
        if (name == type_name) return {dtype, big_endian};
    }
    throw FileError(file, "datatype " + shown(value) + " is not an MRtrix3 type");
}

std::string datatype_name(DType dtype, const fs::path& file) {
    switch (dtype) {
        case DType::Int8: return "Int8";
        case DType::UInt8: return "UInt8";
        case DType::Int16: return "Int16LE";
        case DType::UInt16: return "UInt16LE";
        case DType::Int32: return "Int32LE";
        case DType::UInt32: return "UInt32LE";
        case DType::Int64: return "Int64LE";
        case DType::UInt64: return "UInt64LE";
        case DType::Float32: return "Float32LE";
        case DType::Float64: return "Float64LE";
        default:
            throw FileError(file, "MRtrix3 images here cannot hold " + std::string(dtype_name(dtype)) +
                                      " voxels (use --output-type, or write .npy)");
    }
}

// What the header says, checked.
struct MifFields {
    std::vector<std::int64_t> dim;
    std::vector<double> vox;
    std::vector<std::int64_t> rank;  // per axis: its place in the file's order, 0 fastest
    std::vector<bool> flipped;       // per axis: stored from its last index down
    StoredType stored;
    std::optional<std::array<double, 12>> transform;  // row-major 3 x 4
    double offset = 0, multiplier = 1;
    std::optional<std::string> file;  // the "file" line
    KeyValues properties;             // every line but "file", as read
};

MifFields parse_fields(const KeyValues& lines, const fs::path& file) {
    MifFields fields;
    std::optional<std::string_view> dim, vox, layout, datatype, scaling;
    std::vector<std::string_view> transform;
    for (const auto& [key, value] : lines) {
        if (key == "file") {
            if (fields.file) throw FileError(file, "the header names its data file twice");
            fields.file = value;
            continue;
        }
        fields.properties.emplace_back(key, value);
        const std::string field = lowercase(key);
        std::optional<std::string_view>* slot = field == "dim"        ? &dim
                                                : field == "vox"      ? &vox
                                                : field == "layout"   ? &layout
                                                : field == "datatype" ? &datatype
                                                : field == "scaling"  ? &scaling
                                                                      : nullptr;
        if (slot) {
            if (*slot) throw FileError(file, "the header gives '" + field + "' twice");
            *slot = value;
        } else if (field == "transform") {
            transform.push_back(value);
        }
    }
    const auto missing = [&](const char* field) { return FileError(file, std::string("the header has no '") + field + "' line"); };
    if (!dim) throw missing("dim");
    if (!vox) throw missing("vox");
    if (!layout) throw missing("layout");
    if (!datatype) throw missing("datatype");

    const auto sizes = parse_sizes(*dim);
    if (!sizes) throw FileError(file, "dim " + shown(*dim) + " is not a list of sizes of 1 or more");
    fields.dim = *sizes;
    const std::size_t axes = fields.dim.size();
    if (axes < 2) throw FileError(file, "a 1-D image (dim " + shown(*dim) + ") is not an image gridwarp warps");

    const auto voxel_sizes = parse_numbers(*vox);
    if (!voxel_sizes) throw FileError(file, "vox " + shown(*vox) + " is not a list of numbers");
    fields.vox = *voxel_sizes;
    const std::size_t spatial_axes = std::min<std::size_t>(axes, 3);
    if (fields.vox.size() < spatial_axes) throw FileError(file, "vox " + shown(*vox) + " has fewer entries than the image's spatial axes");
    for (std::size_t axis = 0; axis < spatial_axes; ++axis) {
        const double size = fields.vox[axis];
        if (!std::isfinite(size) || size <= 0 || size > kMaxGeometryMagnitude) {
            throw FileError(file, "vox " + shown(*vox) + ": axis " + std::to_string(axis) + " needs a positive, finite voxel size");
        }
    }

    // layout: "+0,+1,+2" and the like, one signed rank per axis, each rank once (parse_axes).
    const std::vector<std::string_view> ranks = entries(*layout);
    const auto bad_layout = [&] {
        return FileError(file, "layout " + shown(*layout) + " does not give each of the " + std::to_string(axes) + " axes its own rank");
    };
    if (ranks.size() != axes) throw bad_layout();
    std::vector<bool> taken(axes, false);
    for (const std::string_view entry : ranks) {
        const bool flipped = entry.starts_with('-');
        const std::string_view digits = flipped || entry.starts_with('+') ? entry.substr(1) : entry;
        std::int64_t rank = -1;
        const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
        if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || rank < 0 ||
            static_cast<std::uint64_t>(rank) >= axes || taken[static_cast<std::size_t>(rank)]) {
            throw bad_layout();
        }
        taken[static_cast<std::size_t>(rank)] = true;
        fields.rank.push_back(rank);
        fields.flipped.push_back(flipped);
    }

    fields.stored = stored_type(*datatype, file);

    if (!transform.empty()) {
        if (transform.size() < 3) throw FileError(file, "the transform has " + std::to_string(transform.size()) + " rows, expected 3");
        std::array<double, 12> matrix{};
        for (std::size_t row = 0; row < 3; ++row) {
            const auto numbers = parse_numbers(transform[row]);
            if (!numbers || numbers->size() != 4) throw FileError(file, "transform row " + shown(transform[row]) + " is not 4 numbers");
            for (std::size_t column = 0; column < 4; ++column) {
                const double value = (*numbers)[column];
                if (!std::isfinite(value) || std::abs(value) > kMaxGeometryMagnitude) {
                    throw FileError(file, "transform row " + shown(transform[row]) + " needs finite numbers below 1e10");
                }
                matrix[4 * row + column] = value;
            }
        }
        fields.transform = matrix;
    }

    if (scaling) {
        const auto numbers = parse_numbers(*scaling);
        // A multiplier of 0 would make every voxel the offset: MRtrix3 calls it invalid too.
        if (!numbers || numbers->size() != 2 || !std::isfinite((*numbers)[0]) || !std::isfinite((*numbers)[1]) || (*numbers)[1] == 0) {
            throw FileError(file, "scaling " + shown(*scaling) + " is not 'offset,multiplier' with a finite, non-zero multiplier");
        }
        fields.offset = (*numbers)[0];
        fields.multiplier = (*numbers)[1];
    }
    return fields;
}

// The first bytes of a header file: all of it, or (with `count` of a longer one) a prefix.
std::vector<std::uint8_t> header_bytes(const fs::path& file, MifForm form, std::size_t count) {
    if (form == MifForm::Gzipped) return gunzip_prefix(file, count);
    return MappedFile(file).read_prefix(count);
}

struct ParsedHeader {
    MifFields fields;
    std::uint64_t end = 0;  // bytes the header takes (in the inflated stream for .mif.gz)
};

ParsedHeader read_header(const fs::path& file, MifForm form) {
    for (const std::size_t count : {kHeaderFirstRead, kMaxHeaderBytes}) {
        const std::vector<std::uint8_t> bytes = header_bytes(file, form, count + 1);
        const bool whole_file = bytes.size() <= count;
        const std::string_view text(reinterpret_cast<const char*>(bytes.data()), std::min(bytes.size(), count));
        if (auto header = header_lines(text, whole_file, form == MifForm::Detached, file)) {
            return {parse_fields(header->lines, file), header->end};
        }
    }
    throw FileError(file, "the header runs past " + std::to_string(kMaxHeaderBytes) + " bytes without an END line");
}

struct DataLocation {
    fs::path file;
    std::uint64_t offset = 0;
};

// Where the "file" line puts the voxels: ". OFFSET" in the header's own file, or a file name
// (relative to the header's folder) and an optional offset.
DataLocation data_location(const ParsedHeader& header, const fs::path& file, MifForm form) {
    if (!header.fields.file) throw FileError(file, "the header has no 'file' line saying where its voxels are");
    const std::string_view value = *header.fields.file;
    std::vector<std::string_view> words;
    for (std::size_t start = 0; start < value.size();) {
        const auto end = std::min(value.find_first_of(" \t", start), value.size());
        if (end > start) words.push_back(value.substr(start, end - start));
        start = end + 1;
    }
    if (words.empty() || words.size() > 2) throw FileError(file, "file " + shown(value) + " is not a file name and an optional offset");
    DataLocation location;
    if (words.size() == 2) {
        const auto [end, error] = std::from_chars(words[1].data(), words[1].data() + words[1].size(), location.offset);
        if (error != std::errc() || end != words[1].data() + words[1].size()) {
            throw FileError(file, "file " + shown(value) + ": the offset is not a byte count");
        }
    }
    if (words[0] == ".") {
        if (location.offset < header.end) {
            throw FileError(file, "file " + shown(value) + " puts the voxels inside the header, which takes " +
                                      std::to_string(header.end) + " bytes");
        }
        location.file = file;
        return location;
    }
    if (form == MifForm::Gzipped) {
        throw FileError(file, "a .mif.gz holds its voxels itself ('file: . OFFSET'), this one names " + shown(value));
    }
    // MRtrix3 reads "NAME-[].dat" as a numbered series of data files.
    if (words[0].find('[') != std::string_view::npos) {
        throw FileError(file, "file " + shown(value) + ": numbered data files are not supported");
    }
    const fs::path named(words[0]);
    location.file = named.is_absolute() ? named : file.parent_path() / named;
    return location;
}

// ---- Geometry

std::array<double, 12> default_transform(const MifFields& fields) {
    // MRtrix3's Transform::get_default: axes along RAS, the grid centred on the origin.
    std::array<double, 12> transform{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    for (std::size_t axis = 0; axis < std::min<std::size_t>(fields.dim.size(), 3); ++axis) {
        transform[4 * axis + 3] = -0.5 * static_cast<double>(fields.dim[axis] - 1) * fields.vox[axis];
    }
    return transform;
}

// The first `dimension` axes' geometry (LPS): the affine is the transform times the voxel sizes,
// each axis's spacing the length of its column (MRtrix3 rescales non-unit columns the same way).
Geometry mif_geometry(const MifFields& fields, std::size_t dimension, const fs::path& file) {
    const std::array<double, 12> transform = fields.transform ? *fields.transform : default_transform(fields);
    Geometry geometry = Geometry::identity(dimension);
    for (std::size_t j = 0; j < dimension; ++j) {
        double norm = 0;
        for (std::size_t i = 0; i < dimension; ++i) norm += std::pow(transform[4 * i + j] * fields.vox[j], 2);
        norm = std::sqrt(norm);
        if (!(norm > 0)) throw FileError(file, "the transform is singular: axis " + std::to_string(j) + " has no length");
        geometry.spacing[j] = norm;
        for (std::size_t i = 0; i < dimension; ++i) {
            geometry.direction[i * dimension + j] = (i < 2 ? -1.0 : 1.0) * transform[4 * i + j] * fields.vox[j] / norm + 0.0;
        }
    }
    for (std::size_t i = 0; i < dimension; ++i) geometry.origin[i] = (i < 2 ? -1.0 : 1.0) * transform[4 * i + 3] + 0.0;
    if (dimension == 3) {
        const auto& d = geometry.direction;
        const double determinant =
            d[0] * (d[4] * d[8] - d[5] * d[7]) - d[1] * (d[3] * d[8] - d[5] * d[6]) + d[2] * (d[3] * d[7] - d[4] * d[6]);
        if (std::abs(determinant) < 1e-6) throw FileError(file, "the transform is singular");
    }
    return geometry;
}

bool same_geometry(const Geometry& a, const Geometry& b) {
    const auto close = [](const std::vector<double>& x, const std::vector<double>& y) {
        if (x.size() != y.size()) return false;
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (std::abs(x[i] - y[i]) > 1e-6 * std::max(1.0, std::abs(x[i]))) return false;
        }
        return true;
    };
    return close(a.spacing, b.spacing) && close(a.origin, b.origin) && close(a.direction, b.direction);
}

// ---- How the image's axes lie in the file and in memory

// The image's spatial rank: dims 1-3; a series (more than 3 axes) with one slice is 2-D, as a
// NIfTI series is.
std::size_t spatial_rank(const MifFields& fields) {
    const std::size_t axes = fields.dim.size();
    if (axes == 2) return 2;
    return axes > 3 && fields.dim[2] == 1 ? 2 : 3;
}

// Axes 3 and on are the channels, axis 3 fastest (as NIfTI's dims 4-7 are).
std::int64_t channel_count(const MifFields& fields) {
    std::int64_t channels = 1;
    for (std::size_t axis = 3; axis < fields.dim.size(); ++axis) channels *= fields.dim[axis];
    return channels;
}

// Element strides per axis of the file's order: the rank-0 axis moves by 1, each next rank by
// the sizes of those before it; a flipped axis moves backwards.
Shape file_strides(const MifFields& fields) {
    const std::size_t axes = fields.dim.size();
    std::vector<std::size_t> by_rank(axes);
    for (std::size_t axis = 0; axis < axes; ++axis) by_rank[static_cast<std::size_t>(fields.rank[axis])] = axis;
    Shape strides(axes);
    std::int64_t step = 1;
    for (const std::size_t axis : by_rank) {
        strides[axis] = fields.flipped[axis] ? -step : step;
        step *= fields.dim[axis];
    }
    return strides;
}

// Element strides per axis of an image buffer in `layout`: planar (channels, z, y, x) or
// interleaved (z, y, x, channels), the channel axes in order, the first fastest.
Shape memory_strides(const MifFields& fields, ChannelLayout layout) {
    const std::size_t axes = fields.dim.size();
    const std::int64_t channels = channel_count(fields);
    std::int64_t voxels = 1;
    for (std::size_t axis = 0; axis < std::min<std::size_t>(axes, 3); ++axis) voxels *= fields.dim[axis];
    Shape strides(axes);
    std::int64_t step = layout == ChannelLayout::Planar ? 1 : channels;
    for (std::size_t axis = 0; axis < std::min<std::size_t>(axes, 3); ++axis) {
        strides[axis] = step;
        step *= fields.dim[axis];
    }
    step = layout == ChannelLayout::Planar ? voxels : 1;
    for (std::size_t axis = 3; axis < axes; ++axis) {
        strides[axis] = step;
        step *= fields.dim[axis];
    }
    return strides;
}

// Whether the file's elements are in the order of a buffer with these strides (axes of size 1
// may lie anywhere).
bool stored_as(const MifFields& fields, const Shape& file, const Shape& memory) {
    for (std::size_t axis = 0; axis < fields.dim.size(); ++axis) {
        if (fields.dim[axis] > 1 && file[axis] != memory[axis]) return false;
    }
    return true;
}

// A view of elements at `origin` with these strides per axis, its axes in the file's order, the
// slowest first: a copy between two such views reads the file front to back (a copy in the
// image's order would read a file stored with its volumes fastest once per volume).
template <class View, class Pointer>
View view_in_file_order(DType dtype, Pointer origin, const MifFields& fields, const Shape& strides) {
    Shape shape(fields.dim.size()), ordered_strides(fields.dim.size());
    for (std::size_t axis = 0; axis < fields.dim.size(); ++axis) {
        const std::size_t place = fields.dim.size() - 1 - static_cast<std::size_t>(fields.rank[axis]);
        shape[place] = fields.dim[axis];
        ordered_strides[place] = strides[axis];
    }
    return View(dtype, origin, std::move(shape), std::move(ordered_strides));
}

// A byte buffer from the core allocator (huge-page aligned when large), kept alive by the pointer.
std::shared_ptr<std::uint8_t> allocate_bytes(std::size_t bytes) {
    auto owner = std::make_shared<Tensor>(DType::UInt8, Shape{static_cast<std::int64_t>(bytes)});
    return std::shared_ptr<std::uint8_t>(owner, owner->data_as<std::uint8_t>());
}

}  // namespace

// ---- Reading

Image read(const fs::path& file, const ReadOptions& options, bool with_pixels) {
    require_readable_file(file);
    const MifForm form = stored_form(file);
    const ParsedHeader header = read_header(file, form);
    const MifFields& fields = header.fields;
    const DataLocation data = data_location(header, file, form);
    if (data.file != file) require_companion_inside(file, data.file, "data file", options);

    Image image;
    image.kind = FileKind::Volume;
    image.format = "mif";
    const std::size_t rank = spatial_rank(fields);
    for (std::size_t axis = rank; axis-- > 0;) image.spatial.push_back(fields.dim[axis]);
    image.geometry = mif_geometry(fields, rank, file);
    if (!fields.transform) {
        image.warnings.push_back(file.string() + ": the header has no transform; its axes are placed along RAS with the grid centred "
                                                 "on the origin, as MRtrix3 places them");
    }
    const DType stored = fields.stored.dtype;
    const bool scaled = fields.offset != 0 || fields.multiplier != 1;
    if (scaled) image.scaling = ValueScaling{stored, fields.multiplier, fields.offset};
    // Every key-value line but "file": the grid's own (dim, vox, transform) tell a .mif output
    // whether it lies on this grid, where the lines that describe it still hold.
    image.properties = fields.properties;

    // The sizes, checked before anything is allocated or read: the header's voxels against
    // overflow and against the bytes the data file holds.
    const std::size_t element = dtype_size(stored);
    unsigned __int128 count = 1;
    for (const std::int64_t size : fields.dim) {
        count *= static_cast<std::uint64_t>(size);
        if (count * element > (static_cast<unsigned __int128>(1) << 62)) {
            throw FileError(file, "dim " + shown(sizes_text(fields.dim)) + " describes more voxels than any machine holds");
        }
    }
    const auto values = static_cast<std::uint64_t>(count);
    const std::uint64_t voxel_bytes = values * element;
    image.channels = channel_count(fields);
    // A volume per channel, as a NIfTI series is read (an interleaved one would be written to
    // NIfTI as a vector image); one channel is the same bytes either way.
    image.layout = image.channels > 1 ? ChannelLayout::Planar : ChannelLayout::Interleaved;
    const Shape strides = file_strides(fields);
    const auto data_file = std::make_shared<MappedFile>(data.file);
    const std::string where = data.file == file ? "" : " in its data file " + data.file.string();
    if (form == MifForm::Gzipped) {
        const unsigned __int128 inflated = static_cast<unsigned __int128>(data.offset) + voxel_bytes;
        if (inflated > static_cast<unsigned __int128>(kMaxDeflateRatio) * data_file->size() + 4096) {
            throw FileError(file, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels, more than the " +
                                      std::to_string(data_file->size()) + " compressed bytes can hold");
        }
    } else if (data_file->size() < data.offset || data_file->size() - data.offset < voxel_bytes) {
        throw FileError(file, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels from byte " +
                                  std::to_string(data.offset) + where + ", the file holds " + std::to_string(data_file->size()) + " bytes");
    }
    const DType value_type = scaled ? DType::Float64 : stored;
    const Shape storage_shape = image.storage_shape();
    if (!with_pixels) {
        image.pixels = Tensor(value_type, Shape(storage_shape.size(), 0));
        return image;
    }

    // The stored elements in the file's order, aligned: the file's own pages where they can be,
    // else a buffer.
    std::shared_ptr<void> owner;
    std::uint8_t* elements = nullptr;
    if (form == MifForm::Gzipped) {
        // Compressed voxels are as many as the header says: the budget bounds them (and their
        // scaled float64 copy) before anything is allocated.
        check_memory_budget(file, "decoding " + std::to_string(values) + " " + std::string(dtype_name(value_type)) + " values", values,
                            std::max(element, dtype_size(value_type)), options.memory);
        const std::span<const std::uint8_t> compressed(data_file->map(false), data_file->size());
        if (data.offset > kGapInflatedInPlace) {
            auto buffer = allocate_bytes(static_cast<std::size_t>(voxel_bytes));
            gunzip_skipping_into(compressed, data.offset, std::span<std::uint8_t>(buffer.get(), static_cast<std::size_t>(voxel_bytes)),
                                 file);
            elements = buffer.get();
            owner = std::move(buffer);
        } else {
            const std::uint64_t needed = data.offset + voxel_bytes;
            auto buffer = allocate_bytes(static_cast<std::size_t>(needed));
            gunzip_into(compressed, std::span<std::uint8_t>(buffer.get(), static_cast<std::size_t>(needed)), file, options.threads);
            std::memmove(buffer.get(), buffer.get() + data.offset, static_cast<std::size_t>(voxel_bytes));
            elements = buffer.get();
            owner = std::move(buffer);
        }
    } else if (data.offset % element == 0) {
        // The mapping is private: a byte-order swap below stays in this process.
        elements = data_file->map(false) + data.offset;
        owner = data_file;
    } else {
        auto buffer = allocate_bytes(static_cast<std::size_t>(voxel_bytes));
        std::memcpy(buffer.get(), data_file->map(false) + data.offset, static_cast<std::size_t>(voxel_bytes));
        elements = buffer.get();
        owner = std::move(buffer);
    }

    const Shape memory = memory_strides(fields, image.layout);
    if (!stored_as(fields, strides, memory)) {
        // Voxel 0 is stored where each flipped axis stores its last index.
        std::int64_t origin = 0;
        for (std::size_t axis = 0; axis < fields.dim.size(); ++axis) {
            if (strides[axis] < 0) origin -= strides[axis] * (fields.dim[axis] - 1);
        }
        auto arranged = allocate_bytes(static_cast<std::size_t>(voxel_bytes));
        copy_elements(view_in_file_order<ConstTensorView>(stored, elements + origin * static_cast<std::int64_t>(element), fields, strides),
                      view_in_file_order<TensorView>(stored, arranged.get(), fields, memory));
        elements = arranged.get();
        owner = std::move(arranged);
    }
    if (fields.stored.big_endian && element > 1) swap_elements(elements, static_cast<std::size_t>(values), element);
    image.pixels = Tensor::adopt(stored, storage_shape, std::shared_ptr<void>(owner, elements));
    if (scaled) {
        image.scaling->pixels_are_stored = true;
        if (!options.keep_stored_values) apply_value_scaling(image);
    }
    return image;
}

namespace {

// ---- Writing

// A number as the header holds it: the shortest text that reads back as the same double.
std::string number_text(double value) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value + 0.0).ptr;
    return std::string(text, end);
}

std::string numbers_text(const std::vector<double>& values, const char* separator) {
    std::string text;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) text += separator;
        text += number_text(values[i]);
    }
    return text;
}

// What a written .mif holds beside the voxels, and how the voxels get there.
struct MifWritePlan {
    std::string header;          // through END; for a single file, zero-padded to the voxels' offset
    bool store_scaled = false;   // values -> stored integers with the image's offset and multiplier
    bool writes_scaling = false; // the header's scaling line
    DType stored = DType::Float32;
    ChannelLayout file_layout = ChannelLayout::Planar;
    fs::path data_file;          // a .mih's
};

// The header of the MRtrix3 file an image was read from, kept in its properties; nullopt for an
// image from another format.
std::optional<MifFields> source_header(const Image& image) {
    if (image.format != "mif" || image.properties.empty()) return std::nullopt;
    try {
        return parse_fields(image.properties, fs::path());
    } catch (const FileError&) {
        return std::nullopt;
    }
}

// Whether an image lies on the grid of the file it was read from: the same spatial size, channel
// count and geometry.
bool on_read_grid(const Image& image, const Geometry& geometry, const MifFields& read) {
    const std::size_t rank = image.spatial.size();
    if (spatial_rank(read) != rank || channel_count(read) != image.channels) return false;
    for (std::size_t axis = 0; axis < rank; ++axis) {
        if (read.dim[axis] != image.spatial[rank - 1 - axis]) return false;
    }
    try {
        return same_geometry(mif_geometry(read, rank, fs::path()), geometry);
    } catch (const FileError&) {
        return false;
    }
}

MifWritePlan plan_mif_write(const StagedFile& staged, const Image& image) {
    if (image.batch != 1) {
        throw FileError(staged.target, "an MRtrix3 image holds one volume, got N=" + std::to_string(image.batch) + " (write .npy)");
    }
    const std::size_t rank = image.spatial.size();
    if (rank < 2 || rank > 3) {
        throw FileError(staged.target, "MRtrix3 images hold 2-D or 3-D images here, got size " + image_size_text(image.spatial));
    }
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(rank);
    if (geometry.dimension() != rank) {
        throw FileError(staged.target,
                        "geometry of dimension " + std::to_string(geometry.dimension()) + " for a " + std::to_string(rank) + "-D image");
    }
    MifWritePlan plan;
    const ScaledStorage storage = scaled_storage(image);
    plan.store_scaled = storage.converts;
    plan.writes_scaling = storage.writes_scaling;
    plan.stored = storage.stored;
    plan.file_layout = image.layout;

    // Axes: x, y, z (a 2-D image gets one slice: MRtrix3 makes every image 3-D, and warns about
    // the voxel size of a third axis it adds), then the channels: the channel axes of the file
    // read where they still hold as many volumes (their voxel sizes too: an fMRI series' TR),
    // else one axis.
    const std::optional<MifFields> read = source_header(image);
    std::vector<std::int64_t> dim;
    std::vector<double> vox;
    for (std::size_t axis = 0; axis < rank; ++axis) {
        dim.push_back(image.spatial[rank - 1 - axis]);
        vox.push_back(geometry.spacing[axis]);
    }
    if (rank == 2) {
        dim.push_back(1);
        vox.push_back(1);
    }
    const bool read_channel_axes = read && read->dim.size() > 3 && channel_count(*read) == image.channels;
    if (read_channel_axes || image.channels > 1) {
        const std::size_t channel_axes = read_channel_axes ? read->dim.size() - 3 : 1;
        for (std::size_t axis = 3; axis < 3 + channel_axes; ++axis) {
            dim.push_back(read_channel_axes ? read->dim[axis] : image.channels);
            const bool read_size = read_channel_axes && axis < read->vox.size() && std::isfinite(read->vox[axis]);
            vox.push_back(read_size ? read->vox[axis] : 1.0);
        }
    }

    // The layout is the image's memory order: x fastest and the channels slowest (planar), or the
    // channel axes fastest (interleaved).
    const bool channels_first = plan.file_layout == ChannelLayout::Interleaved && image.channels > 1;
    const std::size_t channel_axes = dim.size() > 3 ? dim.size() - 3 : 0;
    std::string layout;
    for (std::size_t axis = 0; axis < dim.size(); ++axis) {
        const std::size_t place = !channels_first ? axis : axis >= 3 ? axis - 3 : axis + channel_axes;
        layout += axis > 0 ? ",+" : "+";
        layout += std::to_string(place);
    }

    // The transform: the direction in scanner RAS and the origin; a 2-D image's third axis along
    // RAS z.
    std::array<double, 12> transform{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    for (std::size_t i = 0; i < rank; ++i) {
        const double ras = i < 2 ? -1.0 : 1.0;
        for (std::size_t j = 0; j < rank; ++j) transform[4 * i + j] = ras * geometry.direction[i * rank + j];
        transform[4 * i + 3] = ras * geometry.origin[i];
    }

    std::string& header = plan.header;
    header = std::string(kFirstLine) + "\n";
    header += "dim: " + sizes_text(dim) + "\n";
    header += "vox: " + numbers_text(vox, ",") + "\n";
    header += "layout: " + layout + "\n";
    header += "datatype: " + datatype_name(plan.stored, staged.target) + "\n";
    for (std::size_t row = 0; row < 3; ++row) {
        header += "transform: " + numbers_text({transform.begin() + 4 * row, transform.begin() + 4 * row + 4}, ", ") + "\n";
    }
    if (plan.writes_scaling) header += "scaling: " + number_text(image.scaling->inter) + "," + number_text(image.scaling->slope) + "\n";
    if (read) {
        const bool same_grid = on_read_grid(image, geometry, *read);
        for (const auto& [key, value] : image.properties) {
            const std::string field = lowercase(key);
            const bool written_above = field == "dim" || field == "vox" || field == "layout" || field == "datatype" ||
                                       field == "transform" || field == "scaling";
            const bool grid_bound = std::find(kGridBoundKeys.begin(), kGridBoundKeys.end(), key) != kGridBoundKeys.end();
            if (!written_above && (same_grid || !grid_bound)) header += key + ": " + value + "\n";
        }
    }
    if (mif_form(staged.file) == MifForm::Detached) {
        // mrconvert's name for a header's data file, and its header, which has no END line.
        const std::string name = staged.file.filename().string();
        plan.data_file = staged.file.parent_path() / (name.substr(0, name.size() - 4) + ".dat");
        header += "file: " + plan.data_file.filename().string() + "\n";
    } else {
        // The smallest aligned offset past the header with its own line.
        std::uint64_t offset = kDataAlignment;
        while (header.size() + ("file: . " + std::to_string(offset) + "\nEND\n").size() > offset) offset += kDataAlignment;
        header += "file: . " + std::to_string(offset) + "\nEND\n";
        header.resize(static_cast<std::size_t>(offset), '\0');
    }
    return plan;
}

std::span<const std::uint8_t> bytes_of(const std::string& text) {
    return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

}  // namespace

void write(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    const MifWritePlan plan = plan_mif_write(staged, image);
    const Image* source = &image;
    Image scaled_copy;
    if (plan.store_scaled) {
        scaled_copy = stored_values(image, plan.stored);
        source = &scaled_copy;
    }
    Tensor rearranged;
    const void* data = pixels_in_layout(*source, plan.file_layout, rearranged);
    const std::span<const std::uint8_t> voxels(static_cast<const std::uint8_t*>(data), source->pixels.nbytes());
    switch (mif_form(staged.file)) {
        case MifForm::Single: write_pieces(staged, {bytes_of(plan.header), voxels}, false, options); break;
        case MifForm::Gzipped: write_pieces(staged, {bytes_of(plan.header), voxels}, true, options); break;
        case MifForm::Detached:
            write_pieces({plan.data_file, staged.target}, {voxels}, false, options);
            write_pieces(staged, {bytes_of(plan.header)}, false, options);
            break;
    }
}

std::optional<MappedOutput> map_output(const StagedFile& staged, const Image& description) {
    if (description.batch != 1 || mif_form(staged.file) != MifForm::Single) return std::nullopt;
    const MifWritePlan plan = plan_mif_write(staged, description);
    if (plan.store_scaled) return std::nullopt;
    const Shape storage_shape = description.storage_shape();
    const std::size_t size = plan.header.size() + static_cast<std::size_t>(shape_numel(storage_shape)) * dtype_size(description.dtype());
    auto file_mapping = create_mapped_output(staged, size);
    if (!file_mapping) return std::nullopt;
    std::memcpy(file_mapping->bytes.get(), plan.header.data(), plan.header.size());
    MappedOutput output;
    output.image = Image::describe_like(description, description.spatial);
    output.image.geometry = description.geometry;
    output.image.pixels = Tensor::adopt(description.dtype(), storage_shape,
                                        std::shared_ptr<void>(file_mapping->bytes, file_mapping->bytes.get() + plan.header.size()));
    output.closers = std::move(file_mapping->closers);
    return output;
}

std::vector<fs::path> files(const fs::path& file, bool for_reading) {
    if (!for_reading) {
        if (mif_form(file) != MifForm::Detached) return {file};
        const std::string name = file.filename().string();
        return {file, file.parent_path() / (name.substr(0, name.size() - 4) + ".dat")};
    }
    std::error_code error;
    if (!fs::is_regular_file(file, error)) return {file};  // the read will say why (and a FIFO is never opened)
    try {
        const MifForm form = stored_form(file);
        const fs::path data = data_location(read_header(file, form), file, form).file;
        if (data != file) return {file, data};
    } catch (const std::exception&) {
        // Not readable as it is: the read itself will refuse it, naming the problem.
    }
    return {file};
}

}  // namespace gridwarp::io::detail::mif

namespace gridwarp::io::detail {

Image read_mif(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels) {
    return mif::read(file, options, with_pixels);
}
void write_mif(const StagedFile& staged, const Image& image, const WriteOptions& options) { mif::write(staged, image, options); }
std::vector<std::filesystem::path> mif_files_read(const std::filesystem::path& file) { return mif::files(file, true); }
std::vector<std::filesystem::path> mif_files_written(const std::filesystem::path& file) { return mif::files(file, false); }
std::optional<MappedOutput> map_mif_output(const StagedFile& staged, const Image& description) {
    return mif::map_output(staged, description);
}

}  // namespace gridwarp::io::detail
