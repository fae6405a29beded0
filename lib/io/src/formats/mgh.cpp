// FreeSurfer MGH volumes: .mgh, and gzipped .mgz and .mgh.gz, read into an Image and written from
// one. The format is big-endian: an uncompressed file's voxels are put in native order in the
// process's private copy of its pages (uint8 voxels are sampled where they lie), a gzipped one is
// inflated once, straight into the voxel buffer, and put in order there. Outputs are written a
// block of rows at a time, each block swapped (and compressed) by the thread that made it.
//
// Layout (FreeSurfer's mghRead/mghWrite, nibabel's freesurfer.mghformat): a 284-byte header of
// int32 version (1), width, height, depth, frames, type, dof, int16 goodRASflag, then float32
// spacing x y z, direction cosines x_r x_a x_s y_r y_a y_s z_r z_a z_s, centre c_r c_a c_s; the
// voxels (x fastest, then y, z, frames); optionally float32 TR (ms), flip angle (radians), TE, TI
// and FoV; then optional tags, which nibabel does not read either.

#include "formats/mgh.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "files/mapped_file.hpp"
#include "files/output_file.hpp"
#include "formats/gzip.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace mgh {
namespace {

constexpr std::size_t kHeaderBytes = 284;  // the voxels start here
constexpr std::int32_t kVersion = 1;
// After the voxels: TR, flip angle, TE, TI and FoV as float32, under nibabel's names.
constexpr std::array<const char*, 5> kScanParameterNames = {"tr", "flip_angle", "te", "ti", "fov"};
constexpr std::size_t kScanParameterBytes = 4 * kScanParameterNames.size();
constexpr const char* kDofProperty = "dof";
// A gzipped file is inflated with room for the tags after the scan parameters, as many bytes as
// its gzip trailer records up to this many, so that one libdeflate call takes the whole stream (a
// stream that does not fit is inflated again by zlib up to the room given).
constexpr std::uint64_t kTagBytesInflatedInPlace = std::uint64_t{64} << 20;
// Bytes before a gzipped file's header in its buffer, so that the voxels after the header start on
// a 64-byte boundary, as the sampler's loads prefer.
constexpr std::size_t kBufferLead = 64 - kHeaderBytes % 64;
// Buffers this large have their byte order reversed on several threads (each faults its own pages).
constexpr std::uint64_t kParallelSwapBytes = std::uint64_t{4} << 20;

struct TypeCode {
    std::int32_t code;
    const char* name;  // FreeSurfer's MRI_* name without the prefix
    DType dtype;
    bool supported;  // by nibabel and gridwarp: the others have no fixed width or no voxel type
};
constexpr TypeCode kTypes[] = {
    {0, "UCHAR", DType::UInt8, true},   {1, "INT", DType::Int32, true},      {2, "LONG", DType::Int64, false},
    {3, "FLOAT", DType::Float32, true}, {4, "SHORT", DType::Int16, true},    {5, "BITMAP", DType::UInt8, false},
    {6, "TENSOR", DType::Float32, false},
};

const TypeCode* find_type(std::int32_t code) {
    for (const TypeCode& type : kTypes) {
        if (type.code == code) return &type;
    }
    return nullptr;
}

const TypeCode* type_for(DType dtype) {
    for (const TypeCode& type : kTypes) {
        if (type.supported && type.dtype == dtype) return &type;
    }
    return nullptr;
}

template <class T>
T load_big_endian(const std::uint8_t* bytes) {
    using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint32_t>;
    Bits bits = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) bits = static_cast<Bits>(bits << 8 | bytes[i]);
    return std::bit_cast<T>(bits);
}

template <class T>
void store_big_endian(std::uint8_t* bytes, T value) {
    using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint32_t>;
    auto bits = std::bit_cast<Bits>(value);
    for (std::size_t i = sizeof(T); i-- > 0;) {
        bytes[i] = static_cast<std::uint8_t>(bits & 0xff);
        bits = static_cast<Bits>(bits >> 8);
    }
}

template <class Bits>
void reverse_each(std::uint8_t* bytes, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        Bits value;
        std::memcpy(&value, bytes + i * sizeof(Bits), sizeof(Bits));
        if constexpr (sizeof(Bits) == 2) {
            value = __builtin_bswap16(value);
        } else {
            value = __builtin_bswap32(value);
        }
        std::memcpy(bytes + i * sizeof(Bits), &value, sizeof(Bits));
    }
}

// Reverses the byte order of `count` elements of `size` bytes (1, 2 or 4) in place.
void reverse_byte_order(std::uint8_t* bytes, std::uint64_t count, std::size_t size, int threads) {
    if (size == 1 || count == 0) return;
    const auto reverse = [&](std::uint64_t first, std::uint64_t n) {
        if (size == 2) {
            reverse_each<std::uint16_t>(bytes + first * size, static_cast<std::size_t>(n));
        } else {
            reverse_each<std::uint32_t>(bytes + first * size, static_cast<std::size_t>(n));
        }
    };
    if (count * size < kParallelSwapBytes || threads == 1) {
        reverse(0, count);
        return;
    }
    const std::uint64_t chunk = (std::uint64_t{1} << 20) / size;
    const auto chunks = static_cast<std::int64_t>((count + chunk - 1) / chunk);
    const int workers = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for num_threads(workers) schedule(dynamic)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::uint64_t first = static_cast<std::uint64_t>(c) * chunk;
        reverse(first, std::min(chunk, count - first));
    }
}

using Matrix34 = std::array<double, 12>;  // row-major 3x4 [linear | offset], RAS

struct Header {
    std::array<std::int64_t, 4> dims{};  // width, height, depth, frames
    const TypeCode* type = nullptr;
    std::int32_t dof = 0;
    std::int16_t good_ras_flag = 0;
    Matrix34 vox2ras{};
};

// FreeSurfer's default geometry when goodRASflag is 0 (MRIallocHeader): 1 mm voxels, coronal
// slices (x to left, y to inferior, z to anterior: LIA), the centre at RAS 0. nibabel 5.0's
// _set_affine_default stores these cosines transposed (LSP); FreeSurfer owns the format.
constexpr std::array<float, 3> kDefaultSpacing = {1, 1, 1};
constexpr std::array<float, 9> kDefaultDirections = {-1, 0, 0, 0, 0, -1, 0, 1, 0};
constexpr std::array<float, 3> kDefaultCentre = {0, 0, 0};

// The voxel-to-RAS matrix as FreeSurfer (MRIxfmCRS2XYZ) and nibabel (MGHHeader.get_affine) compute
// it: columns direction * spacing, and the voxel (width/2, height/2, depth/2), halves kept, at the
// centre.
Matrix34 vox2ras_of(const std::array<std::int64_t, 4>& dims, const std::array<float, 3>& spacing, const std::array<float, 9>& directions,
                    const std::array<float, 3>& centre) {
    Matrix34 m{};
    for (int i = 0; i < 3; ++i) {
        double offset = centre[i];
        for (int j = 0; j < 3; ++j) {
            m[4 * i + j] = static_cast<double>(directions[3 * j + i]) * spacing[j];
            offset -= m[4 * i + j] * (static_cast<double>(dims[j]) / 2.0);
        }
        m[4 * i + 3] = offset;
    }
    return m;
}

Header parse_header(std::span<const std::uint8_t> bytes, const fs::path& file, std::vector<std::string>& warnings) {
    if (bytes.size() < kHeaderBytes) {
        throw FileError(file, "truncated MGH header: " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(kHeaderBytes));
    }
    const auto int32_at = [&](std::size_t offset) { return load_big_endian<std::int32_t>(bytes.data() + offset); };
    const auto float_at = [&](std::size_t offset) { return load_big_endian<float>(bytes.data() + offset); };
    const std::int32_t version = int32_at(0);
    if (version != kVersion) {
        throw FileError(file, "not an MGH file: version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
    }
    Header header;
    static constexpr const char* kDimNames[] = {"width", "height", "depth", "frame count"};
    std::uint64_t voxels = 1;
    for (int i = 0; i < 4; ++i) {
        header.dims[i] = int32_at(4 + 4 * i);
        if (header.dims[i] < 1) {
            throw FileError(file, std::string("the MGH ") + kDimNames[i] + " is " + std::to_string(header.dims[i]) + ", expected a positive size");
        }
        if (voxels > (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(header.dims[i])) {
            throw FileError(file, "the MGH header's sizes overflow: more than 2^62 voxels");
        }
        voxels *= static_cast<std::uint64_t>(header.dims[i]);
    }
    const std::int32_t code = int32_at(20);
    header.type = find_type(code);
    if (!header.type) throw FileError(file, "unknown MGH data type " + std::to_string(code));
    if (!header.type->supported) {
        throw FileError(file, "MGH data type " + std::to_string(code) + " (" + header.type->name +
                                  ") is not supported: gridwarp reads UCHAR, SHORT, INT and FLOAT");
    }
    if (voxels > (std::uint64_t{1} << 62) / dtype_size(header.type->dtype)) {
        throw FileError(file, "the MGH header's sizes overflow: more than 2^62 bytes");
    }
    header.dof = int32_at(24);
    header.good_ras_flag = load_big_endian<std::int16_t>(bytes.data() + 28);

    std::array<float, 3> spacing = kDefaultSpacing, centre = kDefaultCentre;
    std::array<float, 9> directions = kDefaultDirections;
    // nibabel (and FreeSurfer's MATLAB reader) read the fields for any non-zero flag, FreeSurfer's C
    // reader only for a positive one.
    if (header.good_ras_flag != 0) {
        for (int i = 0; i < 3; ++i) spacing[i] = float_at(30 + 4 * i);
        for (int i = 0; i < 9; ++i) directions[i] = float_at(42 + 4 * i);
        for (int i = 0; i < 3; ++i) centre[i] = float_at(78 + 4 * i);
        if (header.good_ras_flag < 0) {
            warnings.push_back(file.string() + ": goodRASflag is " + std::to_string(header.good_ras_flag) +
                               "; its geometry is read as nibabel reads it (FreeSurfer's own tools would use the default coronal one)");
        }
    } else {
        warnings.push_back(file.string() + ": goodRASflag is 0: the geometry is FreeSurfer's default, 1 mm voxels along LIA centred at "
                                           "RAS 0 (nibabel 5.0 reads such a file as LSP)");
    }
    const auto check = [&](const char* field, std::span<const float> values) {
        for (const float v : values) {
            if (!std::isfinite(v) || std::abs(v) > kMaxGeometryMagnitude) {
                throw FileError(file, std::string("the MGH ") + field + " holds " + std::to_string(v) + ", expected finite magnitudes below 1e10");
            }
        }
    };
    check("voxel size", spacing);
    check("direction cosines", directions);
    check("centre", centre);
    header.vox2ras = vox2ras_of(header.dims, spacing, directions, centre);
    return header;
}

// The geometry (LPS) of a voxel-to-RAS matrix: x and y change sign.
Geometry geometry_of(const Matrix34& ras, const fs::path& file) {
    Geometry geometry = Geometry::identity(3);
    for (std::size_t j = 0; j < 3; ++j) {
        const double norm = std::sqrt(ras[j] * ras[j] + ras[4 + j] * ras[4 + j] + ras[8 + j] * ras[8 + j]);
        if (!(norm > 0)) throw FileError(file, "the MGH geometry is singular: axis " + std::to_string(j) + " has no length");
        geometry.spacing[j] = norm;
        for (std::size_t i = 0; i < 3; ++i) geometry.direction[3 * i + j] = (i < 2 ? -1.0 : 1.0) * ras[4 * i + j] / norm + 0.0;
    }
    for (std::size_t i = 0; i < 3; ++i) geometry.origin[i] = (i < 2 ? -1.0 : 1.0) * ras[4 * i + 3] + 0.0;
    const std::vector<double>& d = geometry.direction;
    const double det = d[0] * (d[4] * d[8] - d[5] * d[7]) - d[1] * (d[3] * d[8] - d[5] * d[6]) + d[2] * (d[3] * d[7] - d[4] * d[6]);
    if (std::abs(det) < 1e-6) throw FileError(file, "the MGH geometry is singular: two axes lie along one line");
    return geometry;
}

std::string float_text(float value) {
    char text[32];
    const auto result = std::to_chars(text, text + sizeof(text), value);
    return std::string(text, result.ptr);
}

// The header's dof and the scan parameters among `trailer` (the bytes after the voxels), as text;
// a parameter the file ends before is left out (nibabel reads it as 0).
std::vector<std::pair<std::string, std::string>> properties_of(const Header& header, std::span<const std::uint8_t> trailer) {
    std::vector<std::pair<std::string, std::string>> properties{{kDofProperty, std::to_string(header.dof)}};
    for (std::size_t i = 0; i < kScanParameterNames.size() && 4 * (i + 1) <= trailer.size(); ++i) {
        properties.emplace_back(kScanParameterNames[i], float_text(load_big_endian<float>(trailer.data() + 4 * i)));
    }
    return properties;
}

// What a gzip stream holds after the voxels (`needed` bytes in), by the size its gzip trailer
// records modulo 2^32: exact for the one member that FreeSurfer and nibabel write, and at least
// room for the scan parameters whatever it says.
std::uint64_t trailing_bytes_hint(std::span<const std::uint8_t> stream, std::uint64_t needed) {
    if (stream.size() < 4) return kScanParameterBytes;
    std::uint32_t recorded = 0;
    for (int i = 3; i >= 0; --i) recorded = recorded << 8 | stream[stream.size() - 4 + static_cast<std::size_t>(i)];
    const std::uint64_t trailing = static_cast<std::uint32_t>(recorded - static_cast<std::uint32_t>(needed));
    return trailing <= kTagBytesInflatedInPlace ? std::max<std::uint64_t>(trailing, kScanParameterBytes) : kScanParameterBytes;
}

// ---- Writing

struct WritePlan {
    std::array<std::uint8_t, kHeaderBytes> header{};
    std::array<std::uint8_t, kScanParameterBytes> scan_parameters{};
    std::size_t element_bytes = 1;
};

// The type MGH holds that is nearest to `dtype`, for the refusal's advice.
const char* nearest_type_name(DType dtype) {
    switch (dtype) {
        case DType::Bool: return "uint8";
        case DType::Int8: return "int16";
        case DType::UInt16: return "int32";
        default: return "float32";
    }
}

const std::string* property(const Image& image, const std::string& name) {
    for (const auto& [key, value] : image.properties) {
        if (key == name) return &value;
    }
    return nullptr;
}

template <class T>
T property_number(const Image& image, const std::string& name) {
    const std::string* text = property(image, name);
    T value{};
    if (text) std::from_chars(text->data(), text->data() + text->size(), value);
    return value;
}

// MGH's TR is in milliseconds; 0 where the file does not say.
double repetition_time_of(const Image& image) {
    const double tr = property_number<double>(image, "tr");
    return tr > 0.0 && std::isfinite(tr) ? tr / 1000.0 : 0.0;
}

// Uses the image's metadata only (its pixels may be an empty tensor of the right dtype).
WritePlan plan_write(const fs::path& target, const Image& image) {
    if (image.batch != 1) throw FileError(target, "an MGH file holds one image, got N=" + std::to_string(image.batch) + " (write .npy)");
    const std::size_t rank = image.spatial.size();
    if (rank < 2 || rank > 3) throw FileError(target, "MGH files hold 2-D or 3-D images, got size " + image_size_text(image.spatial));
    const TypeCode* type = type_for(image.dtype());
    if (!type) {
        const std::string name(dtype_name(image.dtype()));
        if (is_complex(image.dtype()) || image.dtype() == DType::String) {
            throw FileError(target, "MGH holds uint8, int16, int32 and float32 voxels, not " + name + " (write .nii or .npy)");
        }
        throw FileError(target, "MGH holds uint8, int16, int32 and float32 voxels, not " + name + ": convert with resample --output-type " +
                                    nearest_type_name(image.dtype()) + ", or write .nii");
    }
    // Width, height, depth and frames, as int32.
    std::array<std::int64_t, 4> dims = {image.spatial[rank - 1], image.spatial[rank - 2], rank == 3 ? image.spatial[0] : 1, image.channels};
    for (const std::int64_t size : dims) {
        if (size < 1 || size > std::numeric_limits<std::int32_t>::max()) {
            throw FileError(target, "MGH sizes are 1 to 2^31 - 1, got " + image_size_text(image.spatial) + " with " +
                                        std::to_string(image.channels) + " frame(s)");
        }
    }
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(rank);
    if (geometry.dimension() != rank) {
        throw FileError(target, "geometry of dimension " + std::to_string(geometry.dimension()) + " for a " + std::to_string(rank) + "-D image");
    }
    // The voxel-to-RAS matrix; a 2-D image's third axis is LPS z, 1 mm.
    Matrix34 ras{};
    ras[10] = 1.0;
    for (std::size_t i = 0; i < rank; ++i) {
        const double sign = i < 2 ? -1.0 : 1.0;
        for (std::size_t j = 0; j < rank; ++j) ras[4 * i + j] = sign * geometry.direction[rank * i + j] * geometry.spacing[j];
        ras[4 * i + 3] = sign * geometry.origin[i];
    }
    // nibabel's MGHImage._affine2header (and FreeSurfer's save_mgh.m): spacing from the columns'
    // lengths, the directions those columns normalised, the centre the voxel (dims / 2).
    WritePlan plan;
    plan.element_bytes = dtype_size(type->dtype);
    std::uint8_t* h = plan.header.data();
    store_big_endian<std::int32_t>(h, kVersion);
    for (int i = 0; i < 4; ++i) store_big_endian<std::int32_t>(h + 4 + 4 * i, static_cast<std::int32_t>(dims[i]));
    store_big_endian<std::int32_t>(h + 20, type->code);
    store_big_endian<std::int32_t>(h + 24, image.format == "mgh" ? property_number<std::int32_t>(image, kDofProperty) : 0);
    store_big_endian<std::int16_t>(h + 28, 1);
    for (int j = 0; j < 3; ++j) {
        const double length = std::sqrt(ras[j] * ras[j] + ras[4 + j] * ras[4 + j] + ras[8 + j] * ras[8 + j]);
        if (!(length > 0) || !std::isfinite(length)) throw FileError(target, "the geometry's axis " + std::to_string(j) + " has no length");
        store_big_endian<float>(h + 30 + 4 * j, static_cast<float>(length));
        for (int i = 0; i < 3; ++i) store_big_endian<float>(h + 42 + 12 * j + 4 * i, static_cast<float>(ras[4 * i + j] / length));
    }
    for (int i = 0; i < 3; ++i) {
        double centre = ras[4 * i + 3];
        for (int j = 0; j < 3; ++j) centre += ras[4 * i + j] * (static_cast<double>(dims[j]) / 2.0);
        store_big_endian<float>(h + 78 + 4 * i, static_cast<float>(centre));
    }
    // The scan parameters describe the acquisition: kept from an MGH input; from another format
    // the TR where it recorded one, the rest 0 (as nibabel writes).
    if (image.format == "mgh") {
        for (std::size_t i = 0; i < kScanParameterNames.size(); ++i) {
            store_big_endian<float>(plan.scan_parameters.data() + 4 * i, property_number<float>(image, kScanParameterNames[i]));
        }
    } else {
        store_big_endian<float>(plan.scan_parameters.data(), static_cast<float>(image.repetition_time * 1000.0));
    }
    return plan;
}

// The voxel bytes of an output in the file's order (x fastest, then y, z, frames), a block at a
// time: the size of each block, and a function that puts block `index`'s values, in native byte
// order, into `bytes` (resized to its size), sampling with `threads` threads where it samples.
struct VoxelBlocks {
    std::vector<std::uint64_t> sizes;
    std::function<void(std::uint64_t index, std::vector<std::uint8_t>& bytes, int threads)> fill;
};

// A box of the output grid: start and extent outermost first, the innermost axis whole.
struct RowBox {
    Shape start;
    Shape extent;
};

// The grid `spatial` (2-D or 3-D) cut into boxes of about `block_bytes` in file order: runs of
// whole slices where a slice fits in a block, else runs of rows inside one slice.
std::vector<RowBox> row_boxes(const Shape& spatial, std::uint64_t row_bytes, std::uint64_t block_bytes) {
    const bool volume = spatial.size() == 3;
    const std::int64_t depth = volume ? spatial[0] : 1, height = spatial[spatial.size() - 2], width = spatial.back();
    const auto rows_per_block = static_cast<std::int64_t>(std::max<std::uint64_t>(1, block_bytes / std::max<std::uint64_t>(1, row_bytes)));
    const auto box = [&](std::int64_t z, std::int64_t slices, std::int64_t y, std::int64_t rows) {
        return volume ? RowBox{{z, y, 0}, {slices, rows, width}} : RowBox{{y, 0}, {rows, width}};
    };
    std::vector<RowBox> boxes;
    if (rows_per_block >= height) {
        const std::int64_t step = rows_per_block / height;
        for (std::int64_t z = 0; z < depth; z += step) boxes.push_back(box(z, std::min(step, depth - z), 0, height));
    } else {
        for (std::int64_t z = 0; z < depth; ++z) {
            for (std::int64_t y = 0; y < height; y += rows_per_block) boxes.push_back(box(z, 1, y, std::min(rows_per_block, height - y)));
        }
    }
    return boxes;
}

// Writes header, voxels (in big-endian order) and scan parameters to `staged`, gzipped where the
// name ends in .mgz or .gz, on `options.threads` threads.
void write_file(const StagedFile& staged, const WritePlan& plan, const VoxelBlocks& voxels, const WriteOptions& options) {
    BlockSource source;
    source.sizes.push_back(kHeaderBytes);
    source.sizes.insert(source.sizes.end(), voxels.sizes.begin(), voxels.sizes.end());
    source.sizes.push_back(kScanParameterBytes);
    const std::uint64_t last = source.sizes.size() - 1;
    const auto big_endian_block = [&](std::uint64_t index, std::vector<std::uint8_t>& bytes, int threads) {
        voxels.fill(index, bytes, threads);
        reverse_byte_order(bytes.data(), bytes.size() / plan.element_bytes, plan.element_bytes, 1);
    };
    source.bytes = [&](std::uint64_t b, std::vector<std::uint8_t>& scratch) -> std::span<const std::uint8_t> {
        if (b == 0) return plan.header;
        if (b == last) return plan.scan_parameters;
        big_endian_block(b - 1, scratch, 1);
        return scratch;
    };
    std::uint64_t total = 0;
    for (const std::uint64_t size : source.sizes) total += size;
    const std::string name = lowercase_filename(staged.target);
    OutputFile out(staged);
    if (ends_with(name, ".mgz") || ends_with(name, ".gz")) {
        // The default level's trial block: the middle one, made on its own.
        std::vector<std::uint8_t> trial;
        if (options.compression_level < 0 && total >= kLevelTrialMinBytes && !voxels.sizes.empty()) {
            big_endian_block(voxels.sizes.size() / 2, trial, options.threads);
        }
        const int level = resolve_compression_level(options.compression_level, trial);
        gzip_compress(source, level, options.threads, [&](std::span<const std::uint8_t> bytes) { out.write(bytes); });
    } else {
        out.reserve(total);
        write_blocks(out, 0, source, options.threads);
    }
    out.close();
}

}  // namespace
}  // namespace mgh

Image read_mgh(const fs::path& file, const ReadOptions& options, bool with_pixels) {
    const auto mapped = std::make_shared<MappedFile>(file);
    const bool compressed = has_gzip_magic(mapped->read_prefix(2));
    Image image;
    const std::vector<std::uint8_t> head = compressed ? gunzip_prefix(file, mgh::kHeaderBytes) : mapped->read_prefix(mgh::kHeaderBytes);
    const mgh::Header header = mgh::parse_header(head, file, image.warnings);
    const DType dtype = header.type->dtype;
    image.kind = FileKind::Volume;
    image.format = "mgh";
    image.channels = header.dims[3];  // frames, a volume each
    image.layout = image.channels > 1 ? ChannelLayout::Planar : ChannelLayout::Interleaved;
    image.spatial = {header.dims[2], header.dims[1], header.dims[0]};
    image.geometry = mgh::geometry_of(header.vox2ras, file);

    // The data's size is checked even when only the header is wanted (a reference grid): a file
    // that cannot hold its voxels is broken, whichever part of it is used.
    const Shape storage_shape = image.storage_shape();
    const auto values = static_cast<std::uint64_t>(shape_numel(storage_shape));
    const std::uint64_t voxel_bytes = values * dtype_size(dtype);
    const std::uint64_t needed = mgh::kHeaderBytes + voxel_bytes;
    if (compressed && needed > kMaxDeflateRatio * mapped->size() + 4096) {
        throw FileError(file, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels, more than the " +
                                  std::to_string(mapped->size()) + " compressed bytes can hold");
    }
    if (!compressed && mapped->size() < needed) {
        throw FileError(file, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels from byte " +
                                  std::to_string(mgh::kHeaderBytes) + ", the file holds " + std::to_string(mapped->size()) + " bytes");
    }
    // An uncompressed file's scan parameters are a page away; a gzipped one's come with its voxels.
    const auto uncompressed_trailer = [&] {
        const std::size_t count = std::min<std::uint64_t>(mgh::kScanParameterBytes, mapped->size() - needed);
        return std::span<const std::uint8_t>(mapped->map(false) + needed, count);
    };
    if (!with_pixels) {
        image.properties = mgh::properties_of(header, compressed ? std::span<const std::uint8_t>() : uncompressed_trailer());
        image.repetition_time = mgh::repetition_time_of(image);
        image.pixels = Tensor(dtype, Shape(storage_shape.size(), 0));
        return image;
    }

    std::shared_ptr<void> storage;
    std::uint8_t* voxels = nullptr;
    if (compressed) {
        // Compressed voxels are as many as the header says: the budget bounds them before anything
        // is allocated.
        check_memory_budget(file, "decoding " + std::to_string(values) + " " + std::string(dtype_name(dtype)) + " values", values,
                            dtype_size(dtype), options.memory);
        const std::span<const std::uint8_t> stream(mapped->map(false), mapped->size());
        const std::uint64_t room = needed + mgh::trailing_bytes_hint(stream, needed);
        auto buffer = std::make_shared<Tensor>(DType::UInt8, Shape{static_cast<std::int64_t>(mgh::kBufferLead + room)});
        std::uint8_t* start = buffer->data_as<std::uint8_t>() + mgh::kBufferLead;
        const std::size_t inflated =
            gunzip_at_least_into(stream, std::span<std::uint8_t>(start, static_cast<std::size_t>(room)), static_cast<std::size_t>(needed),
                                 file, options.threads);
        image.properties = mgh::properties_of(header, std::span<const std::uint8_t>(start + needed, inflated - needed));
        voxels = start + mgh::kHeaderBytes;
        storage = std::shared_ptr<void>(buffer, voxels);
    } else {
        image.properties = mgh::properties_of(header, uncompressed_trailer());
        // The mapping is private: the byte order is put right in this process's copy of the pages.
        voxels = mapped->map(false) + mgh::kHeaderBytes;
        storage = std::shared_ptr<void>(mapped, voxels);
    }
    image.repetition_time = mgh::repetition_time_of(image);
    mgh::reverse_byte_order(voxels, values, dtype_size(dtype), options.threads);
    image.pixels = Tensor::adopt(dtype, storage_shape, std::move(storage));
    return image;
}

void write_mgh(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    const mgh::WritePlan plan = mgh::plan_write(staged.target, image);
    Tensor scratch;
    const auto* data = static_cast<const std::uint8_t*>(pixels_in_layout(image, ChannelLayout::Planar, scratch));
    const std::uint64_t bytes = static_cast<std::uint64_t>(image.pixels.numel()) * plan.element_bytes;
    mgh::VoxelBlocks voxels;
    for (std::uint64_t at = 0; at < bytes; at += kGzipBlockBytes) voxels.sizes.push_back(std::min(kGzipBlockBytes, bytes - at));
    voxels.fill = [&](std::uint64_t index, std::vector<std::uint8_t>& block, int) {
        const std::uint8_t* first = data + index * kGzipBlockBytes;
        block.assign(first, first + voxels.sizes[static_cast<std::size_t>(index)]);
    };
    mgh::write_file(staged, plan, voxels, options);
}

bool mgh_output_streams(const fs::path& target, const Image& description) {
    mgh::plan_write(target, description);
    return true;
}

void stream_mgh_output(const StagedFile& staged, const Image& description, const WriteOptions& options, const WindowSampler& sample,
                       ChannelSampling) {
    const mgh::WritePlan plan = mgh::plan_write(staged.target, description);
    const DType dtype = description.dtype();
    // A frame's box at a time (frames are whole volumes in the file), each sampled on its own.
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(description.spatial.back()) * plan.element_bytes;
    const std::vector<mgh::RowBox> boxes = mgh::row_boxes(description.spatial, row_bytes, kGzipBlockBytes);
    mgh::VoxelBlocks voxels;
    for (std::int64_t frame = 0; frame < description.channels; ++frame) {
        for (const mgh::RowBox& box : boxes) voxels.sizes.push_back(static_cast<std::uint64_t>(shape_numel(box.extent)) * plan.element_bytes);
    }
    voxels.fill = [&](std::uint64_t index, std::vector<std::uint8_t>& block, int threads) {
        const mgh::RowBox& box = boxes[static_cast<std::size_t>(index % boxes.size())];
        block.resize(static_cast<std::size_t>(voxels.sizes[static_cast<std::size_t>(index)]));
        Shape shape = box.extent;
        shape.insert(shape.begin(), {1, 1});
        sample(box.start, box.extent, static_cast<std::int64_t>(index / boxes.size()),
               TensorView(dtype, block.data(), shape, nchw_strides(box.extent, 1, ChannelLayout::Interleaved)), threads);
    };
    mgh::write_file(staged, plan, voxels, options);
}

}  // namespace gridwarp::io::detail
