// NIfTI files: .nii and .nii.gz, .hdr/.img pairs (either part gzipped), read into an Image and
// written from one. Uncompressed little-endian voxels are memory-mapped and sampled in place; gzip
// data is inflated once, straight into the voxel buffer; outputs are written from the image's own
// buffer whenever its layout and type are the file's.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

#include "files/file_checks.hpp"
#include "files/mapped_file.hpp"
#include "files/output_file.hpp"
#include "formats/format_table.hpp"
#include "formats/gzip.hpp"
#include "formats/mapped_output.hpp"
#include "formats/nifti.hpp"
#include "gridwarp/io/nifti_image.hpp"
#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "names.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// A compressed file's bytes before vox_offset are inflated with the voxels, in one buffer, up to
// this many (header extensions); a longer gap is inflated through a small buffer and dropped.
constexpr std::uint64_t kGapInflatedInPlace = std::uint64_t{64} << 10;

bool is_gzipped(const MappedFile& file) { return has_gzip_magic(file.read_prefix(2)); }

// The file with `file`'s name but another ending, keeping the case of the stem.
fs::path with_ending(const fs::path& file, std::size_t old_length, const std::string& ending) {
    const std::string name = file.filename().string();
    return file.parent_path() / (name.substr(0, name.size() - old_length) + ending);
}

struct NiftiPaths {
    fs::path header;
    fs::path data;  // == header for single files
    bool pair = false;
};

// The header and data files of a NIfTI path. Reading looks for the partner of a pair (x.hdr with
// x.img or x.img.gz, x.img with x.hdr or x.hdr.gz); a single file is read as named.
NiftiPaths nifti_paths(const fs::path& file, bool for_reading) {
    const std::string name = lowercase_filename(file);
    NiftiPaths paths{file, file, false};
    auto pick = [&](const fs::path& first, const fs::path& second) {
        std::error_code error;
        return (!for_reading || fs::exists(first, error) || !fs::exists(second, error)) ? first : second;
    };
    if (ends_with(name, ".hdr") || ends_with(name, ".hdr.gz")) {
        const std::size_t length = ends_with(name, ".gz") ? 7 : 4;
        paths.pair = true;
        paths.data = length == 7 ? with_ending(file, length, ".img.gz") : pick(with_ending(file, 4, ".img"), with_ending(file, 4, ".img.gz"));
    } else if (ends_with(name, ".img") || ends_with(name, ".img.gz")) {
        const std::size_t length = ends_with(name, ".gz") ? 7 : 4;
        paths.pair = true;
        paths.header = length == 7 ? with_ending(file, length, ".hdr.gz") : pick(with_ending(file, 4, ".hdr"), with_ending(file, 4, ".hdr.gz"));
    }
    return paths;
}

// A byte buffer from the core allocator (huge-page aligned, untouched pages when large), kept
// alive by the returned pointer.
std::shared_ptr<std::uint8_t> allocate_bytes(std::size_t bytes) {
    auto owner = std::make_shared<Tensor>(DType::UInt8, Shape{static_cast<std::int64_t>(bytes)});
    return std::shared_ptr<std::uint8_t>(owner, owner->data_as<std::uint8_t>());
}

struct DtypeForDatatype {
    DType dtype;
    std::int64_t components;  // interleaved per voxel: 3 for RGB24, 4 for RGBA32
};

DtypeForDatatype dtype_for_datatype(int datatype, const fs::path& file) {
    switch (datatype) {
        case 2: return {DType::UInt8, 1};
        case 4: return {DType::Int16, 1};
        case 8: return {DType::Int32, 1};
        case 16: return {DType::Float32, 1};
        case 32: return {DType::Complex64, 1};
        case 64: return {DType::Float64, 1};
        case 128: return {DType::UInt8, 3};
        case 256: return {DType::Int8, 1};
        case 512: return {DType::UInt16, 1};
        case 768: return {DType::UInt32, 1};
        case 1024: return {DType::Int64, 1};
        case 1280: return {DType::UInt64, 1};
        case 1792: return {DType::Complex128, 1};
        case 2304: return {DType::UInt8, 4};
        default: throw FileError(file, "NIfTI datatype " + std::to_string(datatype) + " is not supported");
    }
}

int datatype_for(DType dtype, std::int64_t components, const fs::path& file) {
    if (components == 3 && dtype == DType::UInt8) return 128;
    if (components == 4 && dtype == DType::UInt8) return 2304;
    switch (dtype) {
        case DType::UInt8: return 2;
        case DType::Int16: return 4;
        case DType::Int32: return 8;
        case DType::Float32: return 16;
        case DType::Complex64: return 32;
        case DType::Float64: return 64;
        case DType::Int8: return 256;
        case DType::UInt16: return 512;
        case DType::UInt32: return 768;
        case DType::Int64: return 1024;
        case DType::UInt64: return 1280;
        case DType::Complex128: return 1792;
        default:
            throw FileError(file, "NIfTI cannot hold " + std::string(dtype_name(dtype)) + " voxels (use --output-type, or write .npy)");
    }
}

int bitpix_for(int datatype) {
    switch (datatype) {
        case 2: case 256: return 8;
        case 4: case 512: return 16;
        case 128: return 24;
        case 8: case 16: case 768: case 2304: return 32;
        case 32: case 64: case 1024: case 1280: return 64;
        case 1792: return 128;
        default: return 0;
    }
}

bool is_scaled(const NiftiHeader& header) {
    return std::isfinite(header.scl_slope) && header.scl_slope != 0 &&
           !(header.scl_slope == 1 && (header.scl_inter == 0 || std::isnan(header.scl_inter)));
}

}  // namespace

namespace {

std::vector<fs::path> nifti_files(const fs::path& file, bool for_reading) {
    const NiftiPaths paths = nifti_paths(file, for_reading);
    if (!paths.pair) return {file};
    return {paths.header, paths.data};
}

}  // namespace

std::vector<fs::path> nifti_files_read(const fs::path& file) { return nifti_files(file, true); }
std::vector<fs::path> nifti_files_written(const fs::path& file) { return nifti_files(file, false); }

// What read_nifti makes of a header, before the voxels: the image without pixels, the stored
// dtype and components per voxel, and whether the values are scaled.
struct NiftiDescription {
    Image image;
    DType stored;
    std::int64_t components;
    bool scaled;
};

NiftiDescription describe_nifti(std::shared_ptr<const NiftiHeader> header, const ReadOptions& options, const fs::path& file) {
    const auto [dtype, components] = dtype_for_datatype(header->datatype, file);
    const std::int64_t rank = header->dim[0];
    if (rank < 2) throw FileError(file, "a 1-D NIfTI file (dim[0] = 1) is not an image gridwarp warps");
    // A series or vector image with one slice is 2-D (as gridwarp writes 2-D vector fields).
    const std::int64_t spatial_rank = rank > 3 && header->dim[3] == 1 ? 2 : std::min<std::int64_t>(rank, 3);
    std::int64_t series = 1;  // dims 4..7: a volume per channel
    for (std::int64_t i = 4; i <= rank; ++i) series *= header->dim[i];
    if (components > 1 && series > 1) throw FileError(file, "RGB/RGBA series (more than 3 dimensions) are not supported");

    Image image;
    image.kind = FileKind::Volume;
    image.format = "nifti";
    image.batch = 1;
    image.channels = components > 1 ? components : series;
    image.layout = series > 1 ? ChannelLayout::Planar : ChannelLayout::Interleaved;
    for (std::int64_t i = spatial_rank; i >= 1; --i) image.spatial.push_back(header->dim[i]);
    bool method_1 = false;
    image.geometry = nifti_geometry(*header, static_cast<std::size_t>(spatial_rank), options.nifti_geometry, file, &method_1);
    if (method_1) {
        image.warnings.push_back(file.string() +
                                 ": neither sform nor qform is set; voxel (0,0,0) is placed at the origin with axes along " +
                                 (options.nifti_geometry == NiftiGeometryRule::Itk ? "LPS (ITK's rule)" : "RAS (NIfTI method 1)") +
                                 " and spacing from pixdim");
    }
    const bool scaled = is_scaled(*header) && components == 1 && !is_complex(dtype);
    if (scaled) image.scaling = ValueScaling{dtype, header->scl_slope, std::isnan(header->scl_inter) ? 0.0 : header->scl_inter};
    image.nifti = header;
    image.repetition_time = nifti_repetition_time(*header);
    return {std::move(image), dtype, components, scaled};
}

Image read_nifti(const fs::path& file, const ReadOptions& options, bool with_pixels) {
    const NiftiPaths paths = nifti_paths(file, true);
    require_readable_file(file);
    if (paths.pair) {
        const bool named_header = file == paths.header;
        require_companion_inside(file, named_header ? paths.data : paths.header, named_header ? "data file" : "header", options);
    }
    MappedFile header_file(paths.header);
    std::vector<std::uint8_t> header_bytes =
        is_gzipped(header_file) ? gunzip_prefix(paths.header, 544) : header_file.read_prefix(544);
    auto header = std::make_shared<NiftiHeader>(parse_nifti_header(header_bytes, paths.header));
    if (header->single_file == paths.pair) {
        throw FileError(paths.header, header->single_file ? "the header says single file (magic n+1/n+2) but this is a .hdr/.img pair"
                                                          : "the header says .hdr/.img pair (magic ni1/ni2) but this is a single .nii file");
    }
    NiftiDescription description = describe_nifti(header, options, paths.header);
    Image image = std::move(description.image);
    const DType dtype = description.stored;
    const std::int64_t components = description.components;
    const bool scaled = description.scaled;
    const Shape storage_shape = image.storage_shape();
    const DType value_type = scaled ? DType::Float64 : dtype;
    // The data's size is checked even when only the header is wanted (a reference grid): a file
    // that cannot hold its voxels is broken, whichever part of it is used.
    const std::uint64_t voxel_bytes = static_cast<std::uint64_t>(shape_numel(storage_shape)) * dtype_size(dtype);
    const std::uint64_t offset = static_cast<std::uint64_t>(header->vox_offset);
    const auto data_file = std::make_shared<MappedFile>(paths.data);
    if (is_gzipped(*data_file)) {
        const std::uint64_t needed = offset + voxel_bytes;
        if (needed > kMaxDeflateRatio * data_file->size() + 4096) {
            throw FileError(paths.data, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels, more than the " +
                                            std::to_string(data_file->size()) + " compressed bytes can hold");
        }
    } else if (data_file->size() < offset + voxel_bytes) {
        throw FileError(paths.data, "truncated: the header describes " + std::to_string(voxel_bytes) + " bytes of voxels from byte " +
                                        std::to_string(offset) + ", the file holds " + std::to_string(data_file->size()) + " bytes");
    }
    if (!with_pixels) {
        image.pixels = Tensor(value_type, Shape(storage_shape.size(), 0));
        return image;
    }

    std::shared_ptr<void> storage;
    std::uint8_t* voxels = nullptr;
    if (is_gzipped(*data_file)) {
        // Compressed voxels are as many as the header says: the budget bounds them (and their
        // scaled float64 copy), before anything is allocated.
        const auto values = static_cast<std::uint64_t>(shape_numel(storage_shape));
        check_memory_budget(paths.data, "decoding " + std::to_string(values) + " " + std::string(dtype_name(value_type)) + " values",
                            values, std::max(dtype_size(dtype), dtype_size(value_type)), options.memory);
        const std::span<const std::uint8_t> compressed(data_file->map(false), data_file->size());
        if (offset > kGapInflatedInPlace) {
            auto buffer = allocate_bytes(static_cast<std::size_t>(voxel_bytes));
            gunzip_skipping_into(compressed, offset, std::span<std::uint8_t>(buffer.get(), static_cast<std::size_t>(voxel_bytes)),
                                 paths.data);
            voxels = buffer.get();
            storage = std::shared_ptr<void>(buffer, voxels);
        } else {
            const std::uint64_t needed = offset + voxel_bytes;
            auto buffer = allocate_bytes(static_cast<std::size_t>(needed));
            gunzip_into(compressed, std::span<std::uint8_t>(buffer.get(), static_cast<std::size_t>(needed)), paths.data, options.threads);
            voxels = buffer.get() + offset;
            if (offset % 64 != 0) {  // keep the voxels aligned for the sampler
                std::memmove(buffer.get(), voxels, static_cast<std::size_t>(voxel_bytes));
                voxels = buffer.get();
            }
            storage = std::shared_ptr<void>(buffer, voxels);
        }
    } else {
        const std::size_t element = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
        if (!header->big_endian && offset % element == 0 && voxel_bytes > 0) {
            // Zero copy: the sampler reads the file's pages, faulting them in from its threads as it
            // goes (populating the mapping up front, on one thread, made a float32 256^3 resample
            // 1.35x slower).
            voxels = data_file->map(false) + offset;
            storage = std::shared_ptr<void>(data_file, voxels);
        } else {
            auto buffer = allocate_bytes(static_cast<std::size_t>(voxel_bytes));
            const std::uint8_t* mapped = data_file->map(false);
            std::memcpy(buffer.get(), mapped + offset, static_cast<std::size_t>(voxel_bytes));
            voxels = buffer.get();
            storage = std::shared_ptr<void>(buffer, voxels);
        }
    }
    if (header->big_endian && components == 1) {
        const std::size_t element = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
        swap_elements(voxels, static_cast<std::size_t>(voxel_bytes / element), element);
    }
    image.pixels = Tensor::adopt(dtype, storage_shape, std::move(storage));
    if (scaled) {
        image.scaling->pixels_are_stored = true;
        if (!options.keep_stored_values) apply_value_scaling(image);
    }
    return image;
}

namespace {

bool same_geometry(const Geometry& a, const Geometry& b) {
    if (a.dimension() != b.dimension()) return false;
    auto close = [](const std::vector<double>& x, const std::vector<double>& y) {
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (std::abs(x[i] - y[i]) > 1e-6 * std::max(1.0, std::abs(x[i]))) return false;
        }
        return true;
    };
    return close(a.spacing, b.spacing) && close(a.origin, b.origin) && close(a.direction, b.direction);
}

}  // namespace

namespace {

// What a NIfTI writer stores for an image: the header, and how the voxels get there.
struct NiftiWritePlan {
    NiftiHeader header;
    NiftiPaths paths;
    bool store_scaled = false;  // values -> stored integers with the image's slope and intercept
    DType stored = DType::Float32;
    ChannelLayout file_layout = ChannelLayout::Interleaved;
};

// Uses the image's metadata only (its pixels may be an empty tensor of the right dtype).
NiftiWritePlan plan_nifti_write(const StagedFile& staged, const Image& image) {
    NiftiWritePlan plan;
    if (image.batch != 1) throw FileError(staged.target, "a NIfTI file holds one image, got N=" + std::to_string(image.batch) + " (write .npy)");
    const std::size_t spatial_rank = image.spatial.size();
    if (spatial_rank < 2 || spatial_rank > 3) {
        throw FileError(staged.target, "NIfTI files hold 2-D or 3-D images here, got size " + image_size_text(image.spatial));
    }
    const Geometry geometry = image.geometry ? *image.geometry : Geometry::identity(spatial_rank);
    if (geometry.dimension() != spatial_rank) {
        throw FileError(staged.target, "geometry of dimension " + std::to_string(geometry.dimension()) + " for a " +
                                    std::to_string(spatial_rank) + "-D image");
    }
    NiftiHeader header;
    if (image.nifti) {
        header = *image.nifti;
    } else {
        header.xyzt_units = 2 | 8;  // mm, s
        header.qform_code = header.sform_code = 1;
        header.pixdim = {1, 1, 1, 1, 1, 1, 1, 1};
        if (image.repetition_time > 0.0) header.pixdim[4] = static_cast<float>(image.repetition_time);  // as dcm2niix writes it
    }
    // Slice timing describes the input's grid: it stays only when the output is on that grid. On
    // that grid the transforms are kept as read, bit for bit.
    bool same_grid = false;
    if (image.nifti) {
        Shape read_spatial;
        const std::int64_t read_rank = std::min<std::int64_t>(image.nifti->dim[0], 3);
        for (std::int64_t i = read_rank; i >= 1; --i) read_spatial.push_back(image.nifti->dim[i]);
        same_grid = read_spatial == image.spatial;
        if (same_grid) {
            try {
                same_grid = same_geometry(nifti_geometry(*image.nifti, spatial_rank, NiftiGeometryRule::Standard, staged.target), geometry);
            } catch (const FileError&) {
                same_grid = false;
            }
        }
        if (!same_grid) {
            header.dim_info = 0;
            header.slice_code = 0;
            header.slice_start = header.slice_end = 0;
            header.slice_duration = 0;
        }
    }

    // What is stored: the scaled type when the image carries one, interleaved RGB(A) bytes, or a
    // volume per channel.
    const ScaledStorage storage = scaled_storage(image);
    const bool store_scaled = storage.converts;
    const DType stored = storage.stored;
    const bool rgb = stored == DType::UInt8 && (image.channels == 3 || image.channels == 4) && image.layout == ChannelLayout::Interleaved &&
                     (!image.nifti || image.nifti->datatype == 128 || image.nifti->datatype == 2304 || image.nifti->dim[0] <= 3);
    header.datatype = datatype_for(stored, rgb ? image.channels : 1, staged.target);
    header.bitpix = bitpix_for(header.datatype);
    if (storage.writes_scaling) {
        header.scl_slope = image.scaling->slope;
        header.scl_inter = image.scaling->inter;
    } else {
        header.scl_slope = 1;
        header.scl_inter = 0;
    }
    for (std::size_t i = 1; i < 8; ++i) header.dim[i] = 1;
    for (std::size_t i = 0; i < spatial_rank; ++i) header.dim[i + 1] = image.spatial[spatial_rank - 1 - i];
    const std::int64_t channels = rgb ? 1 : image.channels;
    if (channels == 1 && spatial_rank == 3 && image.nifti && image.nifti->dim[0] > 3) {
        // A series of one volume keeps its rank (a 4-D file with one time point).
        bool ones = true;
        for (std::int64_t i = 4; i <= image.nifti->dim[0]; ++i) ones = ones && image.nifti->dim[i] == 1;
        header.dim[0] = ones ? image.nifti->dim[0] : 3;
    } else if (channels == 1) {
        header.dim[0] = static_cast<std::int64_t>(spatial_rank);
    } else {
        if (spatial_rank == 2) header.dim[3] = 1;
        std::int64_t carried = 1;
        if (image.nifti && image.nifti->dim[0] > 3) {
            for (std::int64_t i = 4; i <= image.nifti->dim[0]; ++i) carried *= image.nifti->dim[i];
        }
        if (image.nifti && image.nifti->dim[0] > 3 && carried == channels) {
            header.dim[0] = image.nifti->dim[0];
            for (std::int64_t i = 4; i <= header.dim[0]; ++i) header.dim[i] = image.nifti->dim[i];
        } else if (header.intent_code == 1006 || header.intent_code == 1007 ||
                   (header.intent_code == 0 && image.layout == ChannelLayout::Interleaved)) {
            header.dim[0] = 5;  // vectors: NIfTI's fifth dimension
            header.dim[5] = channels;
            if (header.intent_code == 0) header.intent_code = 1007;
        } else {
            header.dim[0] = 4;
            header.dim[4] = channels;
        }
    }
    bool needs_nifti_2 = false;
    for (std::size_t i = 1; i < 8; ++i) needs_nifti_2 = needs_nifti_2 || header.dim[i] > 32767;
    header.version = (image.nifti && image.nifti->version == 2) || needs_nifti_2 ? 2 : 1;
    const NiftiPaths paths = nifti_paths(staged.file, false);
    header.single_file = !paths.pair;
    header.vox_offset = paths.pair ? 0 : (header.version == 2 ? 544 : 352);
    header.big_endian = false;
    if (!same_grid) set_nifti_geometry(header, geometry);
    plan.header = header;
    plan.paths = paths;
    plan.store_scaled = store_scaled;
    plan.stored = stored;
    plan.file_layout = rgb || image.channels == 1 ? ChannelLayout::Interleaved : ChannelLayout::Planar;
    return plan;
}

}  // namespace

void write_nifti(const StagedFile& staged, const Image& image, const WriteOptions& options) {
    const NiftiWritePlan plan = plan_nifti_write(staged, image);
    const NiftiHeader& header = plan.header;
    const NiftiPaths& paths = plan.paths;
    const bool store_scaled = plan.store_scaled;
    const DType stored = plan.stored;

    // The voxel bytes in the file's order: x fastest, then y, z, then the series / vector dims.
    Tensor converted;
    const Image* source = &image;
    Image scaled_copy;
    if (store_scaled) {
        scaled_copy = stored_values(image, stored);
        source = &scaled_copy;
    }
    const void* data = pixels_in_layout(*source, plan.file_layout, converted);
    const std::span<const std::uint8_t> voxels(static_cast<const std::uint8_t*>(data), source->pixels.nbytes());

    std::size_t header_size = 0;
    const auto header_bytes = serialize_nifti_header(header, header_size);
    const std::span<const std::uint8_t> header_span(header_bytes.data(), header_size);
    const bool compress_header = ends_with(lowercase_filename(paths.header), ".gz");
    const bool compress_data = ends_with(lowercase_filename(paths.data), ".gz");
    if (paths.pair) {
        write_pieces({paths.data, staged.target}, {voxels}, compress_data, options);
        write_pieces({paths.header, staged.target}, {header_span}, compress_header, options);
    } else {
        write_pieces({paths.header, staged.target}, {header_span, voxels}, compress_header, options);
    }
}

namespace {

// A box of an output's spatial grid: start and extent outermost first, the innermost axis whole.
struct RowBox {
    Shape start;
    Shape extent;
};

// The output grid `spatial` cut into boxes of about `block_bytes` each (rows of `row_bytes`), in
// the order of the file's bytes: whole slabs of the outermost axis that can hold a whole index of
// it, else boxes inside one index of it, and so on inwards. No box is empty; a row is never cut.
std::vector<RowBox> row_boxes(const Shape& spatial, std::uint64_t row_bytes, std::uint64_t block_bytes) {
    const std::size_t rank = spatial.size();
    const std::uint64_t rows_per_block = std::max<std::uint64_t>(1, block_bytes / std::max<std::uint64_t>(1, row_bytes));
    // The split axis: the outermost one whose single index holds no more rows than a block.
    std::size_t split = 0;
    std::uint64_t rows_per_index = 1;  // rows in one index of the split axis
    if (rank > 1) {
        split = rank - 2;
        for (std::size_t a = rank - 2; a-- > 0;) {
            const std::uint64_t rows = rows_per_index * static_cast<std::uint64_t>(spatial[a + 1]);
            if (rows > rows_per_block) break;
            rows_per_index = rows;
            split = a;
        }
    }
    std::vector<RowBox> boxes;
    if (rank <= 1 || shape_numel(spatial) == 0) {
        boxes.push_back({Shape(rank, 0), spatial});
        return boxes;
    }
    const auto step = static_cast<std::int64_t>(std::max<std::uint64_t>(1, rows_per_block / rows_per_index));
    Shape index(split, 0);  // the fixed indices of the axes outside the split one
    for (;;) {
        for (std::int64_t first = 0; first < spatial[split]; first += step) {
            RowBox box{Shape(rank, 0), spatial};
            for (std::size_t a = 0; a < split; ++a) {
                box.start[a] = index[a];
                box.extent[a] = 1;
            }
            box.start[split] = first;
            box.extent[split] = std::min(step, spatial[split] - first);
            boxes.push_back(std::move(box));
        }
        std::size_t a = split;
        while (a > 0 && ++index[a - 1] == spatial[a - 1]) index[--a] = 0;
        if (a == 0) break;
    }
    return boxes;
}

// Whether a plan stores the image's pixels as they are (no scaling, type or layout conversion).
bool stores_pixels_as_they_are(const NiftiWritePlan& plan, const Image& description) {
    const bool same_layout = description.channels == 1 || description.layout == plan.file_layout;
    return !plan.store_scaled && plan.stored == description.dtype() && same_layout;
}

// The boxes of a file that stores a volume per channel, each channel's box a block of the file,
// sampled for a group of channels at once (so that their positions are planned once, not once a
// channel) by the first thread that asks for one of them; the others wait for it. A group is
// dropped when its last channel's box has been taken, so that in file order (every box of one
// channel, then the next channel's) about a group's volumes are held at a time.
class ChannelGroupBoxes {
public:
    ChannelGroupBoxes(const WindowSampler& sample, DType dtype, std::int64_t channels, std::int64_t group_channels,
                      const std::vector<RowBox>& boxes)
        : sample_(sample), dtype_(dtype), channels_(channels), group_channels_(group_channels), boxes_(boxes) {}

    // Channel `channel`'s values over box `box`, copied into `scratch`.
    std::span<const std::uint8_t> take(std::int64_t channel, std::size_t box, std::vector<std::uint8_t>& scratch) {
        const std::int64_t first = channel / group_channels_ * group_channels_;
        const std::int64_t count = std::min(group_channels_, channels_ - first);
        const auto key = std::make_pair(first, box);
        std::shared_ptr<Group> group;
        bool mine = false;
        {
            std::lock_guard lock(mutex_);
            std::shared_ptr<Group>& slot = groups_[key];
            if (!slot) {
                slot = std::make_shared<Group>();
                slot->untaken = count;
                mine = true;
            }
            group = slot;
        }
        const RowBox& row_box = boxes_[box];
        const auto box_bytes = static_cast<std::size_t>(shape_numel(row_box.extent)) * dtype_size(dtype_);
        if (mine) {
            try {
                group->pixels.reset(new std::uint8_t[box_bytes * static_cast<std::size_t>(count)]);
                Shape shape = row_box.extent;
                shape.insert(shape.begin(), {1, count});
                sample_(row_box.start, row_box.extent, first,
                        TensorView(dtype_, group->pixels.get(), shape, nchw_strides(row_box.extent, count, ChannelLayout::Planar)), 1);
            } catch (...) {
                std::lock_guard lock(mutex_);
                group->failure = std::current_exception();
                group->ready = true;
                ready_.notify_all();
                throw;
            }
            std::lock_guard lock(mutex_);
            group->ready = true;
            ready_.notify_all();
        } else {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [&] { return group->ready; });
            if (group->failure) std::rethrow_exception(group->failure);
        }
        scratch.assign(group->pixels.get() + static_cast<std::size_t>(channel - first) * box_bytes,
                       group->pixels.get() + static_cast<std::size_t>(channel - first + 1) * box_bytes);
        std::lock_guard lock(mutex_);
        if (--group->untaken == 0) groups_.erase(key);
        return std::span<const std::uint8_t>(scratch.data(), scratch.size());
    }

private:
    struct Group {
        std::unique_ptr<std::uint8_t[]> pixels;  // (count, box) planar
        bool ready = false;
        std::exception_ptr failure;
        std::int64_t untaken = 0;
    };
    const WindowSampler& sample_;
    DType dtype_;
    std::int64_t channels_, group_channels_;
    const std::vector<RowBox>& boxes_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::map<std::pair<std::int64_t, std::size_t>, std::shared_ptr<Group>> groups_;
};

// Whether the voxels go to the file as the sampler makes them: a block sampled into a view laid
// out as the file stores it needs no other conversion.
bool stores_values_as_they_are(const NiftiWritePlan& plan, const Image& description) {
    return !plan.store_scaled && plan.stored == description.dtype();
}

}  // namespace

bool nifti_output_streams(const fs::path& target, const Image& description) {
    // A plain .nii is sampled into its own mapped pages instead (map_nifti_output): that writes
    // each byte once, where a block written out is also copied into the page cache.
    if (ends_with(lowercase_filename(target), ".nii")) return false;
    if (description.batch != 1) return false;
    const StagedFile plan_only{target, target};  // for the plan's names: nothing is written here
    return stores_values_as_they_are(plan_nifti_write(plan_only, description), description);
}

void stream_nifti_output(const StagedFile& staged, const Image& description, const WriteOptions& options,
                         const WindowSampler& sample, ChannelSampling channel_sampling) {
    const NiftiWritePlan plan = plan_nifti_write(staged, description);
    if (!stores_values_as_they_are(plan, description)) throw std::logic_error("stream_nifti_output: the voxels need a conversion");
    std::size_t header_size = 0;
    const auto header_bytes = serialize_nifti_header(plan.header, header_size);
    const std::span<const std::uint8_t> header_span(header_bytes.data(), header_size);

    // The voxels in file order, a box of rows per block, each sampled into its writer's scratch;
    // where the file stores a volume per channel, a box of one channel per block, sampled with its
    // group of channels (ChannelGroupBoxes).
    const DType dtype = description.dtype();
    const bool volume_per_channel = description.channels > 1 && plan.file_layout == ChannelLayout::Planar;
    const std::int64_t channels_per_block = volume_per_channel ? 1 : description.channels;
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(description.spatial.back() * channels_per_block) * dtype_size(dtype);
    const std::uint64_t volume_bytes = row_bytes * static_cast<std::uint64_t>(shape_numel(description.spatial) / description.spatial.back());
    // A volume in at least two boxes, so that two threads sample two groups at once rather than
    // one waiting for the other's.
    const std::uint64_t block_bytes =
        volume_per_channel ? std::clamp(volume_bytes / 2, kMinSeriesBlockBytes, kGzipBlockBytes) : kGzipBlockBytes;
    const std::vector<RowBox> boxes = row_boxes(description.spatial, row_bytes, block_bytes);
    const std::int64_t group_channels =
        channel_sampling == ChannelSampling::Apart || !volume_per_channel
            ? 1
            : std::clamp<std::int64_t>(static_cast<std::int64_t>(kChannelGroupBytes / std::max<std::uint64_t>(1, volume_bytes)), 1,
                                       description.channels);
    ChannelGroupBoxes grouped(sample, dtype, description.channels, group_channels, boxes);
    const std::uint64_t channel_passes = volume_per_channel ? static_cast<std::uint64_t>(description.channels) : 1;
    const bool single_file = !plan.paths.pair;
    const std::uint64_t first_box = single_file ? 1 : 0;  // a single file's block 0 is its header
    BlockSource source;
    if (single_file) source.sizes.push_back(header_size);
    for (std::uint64_t pass = 0; pass < channel_passes; ++pass) {
        for (const RowBox& box : boxes) {
            source.sizes.push_back(static_cast<std::uint64_t>(shape_numel(box.extent) * channels_per_block) * dtype_size(dtype));
        }
    }
    // Data block `index` (after the header) sampled on its own into `pixels`: (1, C, extent...),
    // channels interleaved or (one channel) alone.
    const auto sample_block = [&](std::uint64_t index, std::vector<std::uint8_t>& pixels, int threads) {
        const RowBox& box = boxes[static_cast<std::size_t>(index % boxes.size())];
        pixels.resize(static_cast<std::size_t>(source.sizes[static_cast<std::size_t>(first_box + index)]));
        Shape shape = box.extent;
        shape.insert(shape.begin(), {1, channels_per_block});
        sample(box.start, box.extent, static_cast<std::int64_t>(index / boxes.size()),
               TensorView(dtype, pixels.data(), shape, nchw_strides(box.extent, channels_per_block, ChannelLayout::Interleaved)), threads);
    };
    source.bytes = [&](std::uint64_t b, std::vector<std::uint8_t>& scratch) -> std::span<const std::uint8_t> {
        if (b < first_box) return header_span;
        const std::uint64_t index = b - first_box;
        if (group_channels > 1) {
            return grouped.take(static_cast<std::int64_t>(index / boxes.size()), static_cast<std::size_t>(index % boxes.size()), scratch);
        }
        sample_block(index, scratch, 1);
        return std::span<const std::uint8_t>(scratch.data(), scratch.size());
    };

    const bool compress_header = ends_with(lowercase_filename(plan.paths.header), ".gz");
    const bool compress_data = ends_with(lowercase_filename(plan.paths.data), ".gz");
    {
        OutputFile out({plan.paths.data, staged.target});
        if (compress_data) {
            // The default level's trial block: the middle one, sampled on its own (so that no group
            // of ChannelGroupBoxes is touched before the blocks are taken in order).
            std::uint64_t total = 0;
            for (const std::uint64_t size : source.sizes) total += size;
            std::vector<std::uint8_t> trial;
            if (options.compression_level < 0 && total >= kLevelTrialMinBytes) {
                sample_block((source.sizes.size() - first_box) / 2, trial, options.threads);
            }
            const int level = resolve_compression_level(options.compression_level, trial);
            gzip_compress(source, level, options.threads, [&](std::span<const std::uint8_t> bytes) { out.write(bytes); });
        } else {
            std::uint64_t total = 0;
            for (const std::uint64_t size : source.sizes) total += size;
            out.reserve(total);
            write_blocks(out, 0, source, options.threads);
        }
        out.close();
    }
    if (!single_file) write_pieces({plan.paths.header, staged.target}, {header_span}, compress_header, options);
}

std::optional<MappedOutput> map_nifti_output(const StagedFile& staged, const Image& description) {
    const std::string name = lowercase_filename(staged.file);
    if (!ends_with(name, ".nii")) return std::nullopt;  // compressed data and pairs are written afterwards
    const NiftiWritePlan plan = plan_nifti_write(staged, description);
    if (!stores_pixels_as_they_are(plan, description)) return std::nullopt;
    std::size_t header_size = 0;
    const auto header_bytes = serialize_nifti_header(plan.header, header_size);
    const auto offset = static_cast<std::size_t>(plan.header.vox_offset);
    const Shape storage_shape = description.storage_shape();
    const std::size_t size = offset + static_cast<std::size_t>(shape_numel(storage_shape)) * dtype_size(description.dtype());

    auto file_mapping = create_mapped_output(staged, size);
    if (!file_mapping) return std::nullopt;
    std::memcpy(file_mapping->bytes.get(), header_bytes.data(), header_size);
    MappedOutput output;
    output.image = Image::describe_like(description, description.spatial);
    output.image.geometry = description.geometry;
    output.image.pixels =
        Tensor::adopt(description.dtype(), storage_shape, std::shared_ptr<void>(file_mapping->bytes, file_mapping->bytes.get() + offset));
    output.closers = std::move(file_mapping->closers);
    return output;
}

namespace {

// An uncompressed .nii's voxels as tiles, copied out of its memory map (the kernel pages the file
// in and out as the tiles are read).
class NiftiTileSource final : public TileSource {
public:
    NiftiTileSource(Image description, std::shared_ptr<MappedFile> data, std::uint64_t offset, bool swap)
        : description_(std::move(description)), data_(std::move(data)), voxels_(data_->map(false) + offset), swap_(swap) {
        layout_.spatial = description_.spatial;
        layout_.tile = Shape(layout_.spatial.size(), layout_.spatial.size() == 2 ? 512 : 128);
        for (std::size_t a = 0; a < layout_.spatial.size(); ++a) layout_.tile[a] = std::min(layout_.tile[a], layout_.spatial[a]);
        layout_.channels = 1;
        layout_.dtype = description_.dtype();
    }

    Image describe() const override {
        Image image = Image::describe_like(description_, description_.spatial);
        image.geometry = description_.geometry;
        image.warnings = description_.warnings;
        return image;
    }

    void read_tile(const Shape& index, std::uint8_t* out) const override {
        const std::size_t value_bytes = dtype_size(layout_.dtype);
        for_each_tile_row(layout_, index, out, [&](std::size_t in_file, std::size_t in_tile, std::size_t voxels) {
            std::uint8_t* row = out + in_tile * value_bytes;
            std::memcpy(row, voxels_ + in_file * value_bytes, voxels * value_bytes);
            if (swap_) swap_elements(row, voxels, value_bytes);
        });
    }

private:
    Image description_;
    std::shared_ptr<MappedFile> data_;
    const std::uint8_t* voxels_;
    bool swap_;
};

}  // namespace

std::unique_ptr<TileSource> open_nifti_tiles(const fs::path& file, const ReadOptions& options) {
    if (!ends_with(lowercase_filename(file), ".nii")) return nullptr;
    Image description = read_nifti(file, options, false);  // every check of the header and the file's size
    const DType dtype = description.dtype();
    const std::size_t rank = description.spatial.size();
    if (description.channels != 1 || description.batch != 1 || description.scaling || is_complex(dtype) || rank < 2 || rank > 3) return nullptr;
    auto data = std::make_shared<MappedFile>(file);
    if (is_gzipped(*data) || shape_numel(description.spatial) == 0) return nullptr;
    const NiftiHeader& header = *description.nifti;
    return std::make_unique<NiftiTileSource>(std::move(description), std::move(data), static_cast<std::uint64_t>(header.vox_offset),
                                             header.big_endian && dtype_size(dtype) > 1);
}

bool nifti_writes_tiles(const fs::path& file) { return ends_with(lowercase_filename(file), ".nii"); }

}  // namespace gridwarp::io::detail

namespace gridwarp::io {

Image nifti_image_description(std::shared_ptr<const NiftiHeader> header, const ReadOptions& options, const std::filesystem::path& named) {
    auto description = detail::describe_nifti(std::move(header), options, named);
    description.image.pixels = Tensor(description.scaled ? DType::Float64 : description.stored, Shape{0});
    return std::move(description.image);
}

NiftiHeader nifti_header_for(const Image& image) {
    const std::filesystem::path name = "image.nii";
    return detail::plan_nifti_write(StagedFile{name, name}, image).header;
}

}  // namespace gridwarp::io
