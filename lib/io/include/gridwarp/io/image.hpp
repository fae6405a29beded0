// Images, volumes and tensors read from and written to files, the format chosen by extension:
//  - .npy: a tensor (N, C, D1..Dr) as it is;
//  - .nii, .nii.gz, .hdr/.img (.gz): a volume through gridwarp's NIfTI codec (nifti.hpp);
//  - .mif, .mif.gz, .mih: an MRtrix3 volume through gridwarp's own codec;
//  - .nrrd, .nhdr, .mha, .mhd: a volume through ITK, with its physical geometry;
//  - .mgh, .mgz, .mgh.gz: a FreeSurfer volume through gridwarp's own MGH codec;
//  - anything else (.png, .jpg, .tif, .bmp, .webp, ...): a raster image through OpenCV.
// Pixels stay in the file's memory layout; nchw() views them as (N, C, D1..Dr) through strides, so
// nothing is converted or copied to be sampled. OpenCV and ITK appear in no public header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridwarp/io/nifti.hpp"
#include "gridwarp/tensor.hpp"

namespace gridwarp::io {

namespace detail {
class StagedOutput;          // files/mapped_file.hpp
struct FormatHandler;        // formats/format_table.hpp
}

enum class FileKind { Tensor, Raster, Volume };
std::string_view file_kind_name(FileKind kind);
// A spatial shape (outermost first) as every message gives sizes, x first with the axes named:
// "176 x 240 x 256 (W x H x D)".
std::string image_size_text(const Shape& spatial);

// Physical geometry in ITK's convention (LPS, millimetres). Axes are innermost-first (i, j, k):
// spacing[0] belongs to the fastest-varying axis (W). direction is row-major dim x dim; its
// column j is the direction of axis j: a unit vector, not necessarily orthogonal to the others (a
// sheared NIfTI sform). The physical point of index (i, j, k) is
// origin + direction * diag(spacing) * (i, j, k).
struct Geometry {
    std::vector<double> spacing;
    std::vector<double> origin;
    std::vector<double> direction;

    std::size_t dimension() const { return spacing.size(); }
    static Geometry identity(std::size_t dimension);
};

// How the channels sit in memory.
enum class ChannelLayout {
    Interleaved,  // channels fastest: OpenCV's HWC, ITK's vector pixels
    Planar,       // channels slowest: .npy tensors (N, C, ...), 4-D series (a volume per channel)
};

// Stored values that stand for others: value = stored * slope + inter (NIfTI's scl_slope/scl_inter).
// An image read from such a file holds the values (float64); a writer that can store the scaling
// writes the stored type back with the same slope and intercept (rounded, saturated).
struct ValueScaling {
    DType stored = DType::Int16;
    double slope = 1.0;
    double inter = 0.0;
    // The pixels are the stored values themselves (ReadOptions::keep_stored_values): a writer that
    // stores a scaling writes them as they are, apply_value_scaling turns them into the values.
    bool pixels_are_stored = false;
};

struct Image {
    FileKind kind = FileKind::Tensor;
    std::string format;        // "png", "nifti", "nrrd", "metaimage", "npy", ...
    Tensor pixels;             // the buffer, in the file's layout
    std::int64_t batch = 1;    // N: 1 except for .npy tensors
    std::int64_t channels = 1; // C
    Shape spatial;             // (D1..Dr), outermost first: (H, W) or (D, H, W)
    ChannelLayout layout = ChannelLayout::Planar;
    std::optional<Geometry> geometry;  // volumes only
    std::string channel_order;         // "BGR", "BGRA" for OpenCV colour images, else empty
    std::shared_ptr<const NiftiHeader> nifti;  // the NIfTI header read, carried to NIfTI outputs
    std::optional<ValueScaling> scaling;       // see ValueScaling
    // The scan's repetition time in seconds (0: not known), carried between formats that record it:
    // a NIfTI series' pixdim[4], MGH's TR, DICOM's RepetitionTime.
    double repetition_time = 0.0;
    std::vector<std::pair<std::string, std::string>> properties;  // a format's own header fields, kept for an output of that format (MGH's TR, flip angle, TE, TI; .mif key-values)
    std::vector<std::string> warnings;         // what the reader wants the user to know
    // The EXIF orientation an image file declares (1-8; 0: none). The reader turns the pixels by it
    // unless ReadOptions::keep_orientation, so that they are what a viewer shows.
    int exif_orientation = 0;
    // Pages (images) in the file: a multi-page TIFF holds several, of which the first is read.
    std::int64_t pages = 1;

    DType dtype() const { return pixels.dtype(); }
    // (N, C, D1..Dr) views of the pixels.
    ConstTensorView nchw() const;
    TensorView nchw();

    // An image of the same kind, format, layout, channels, dtype, NIfTI header, properties and scaling with
    // another spatial shape (geometry left for the caller to set).
    static Image allocate_like(const Image& prototype, const Shape& spatial);
    // The same without pixels (an empty tensor of the dtype): a description for PendingOutput.
    static Image describe_like(const Image& prototype, const Shape& spatial);
    // The same image (header, geometry, layout, ...) holding `new_pixels`, of the same storage shape
    // and any dtype: an image in memory is shared, never changed, so a conversion makes a new one.
    Image with_pixels(Tensor new_pixels) const;
    // Allocates zeroed pixels for the description's shape, layout and dtype.
    void allocate();
    // The C-ordered shape of the pixel buffer: (N, C, D1..Dr) when planar, (D1..Dr, C) when
    // interleaved (N first when N > 1).
    Shape storage_shape() const;
    // A planar tensor image over (N, C, D1..Dr).
    static Image from_tensor(Tensor tensor);
};

// The geometry of `new_spatial` points covering the physical extent that `geometry` gives
// `old_spatial` points (shapes outermost-first). align_corners=0 keeps the outer edges of the edge
// voxels in place, align_corners=1 the centres of the corner voxels.
Geometry resampled_geometry(const Geometry& geometry, const Shape& old_spatial, const Shape& new_spatial,
                            bool align_corners);

// The default --max-memory: room for a 512^3 float32 volume several times over, refusing what a
// few megabytes of gzip can declare (docs/reliability.md says why this number).
inline constexpr std::uint64_t kDefaultMaxMemory = std::uint64_t{2} << 30;

// The most memory one buffer may take when its size comes from what a file or a command line
// declares rather than from bytes a file holds: compressed voxels, encoded images, outputs.
struct MemoryBudget {
    std::uint64_t max_bytes = kDefaultMaxMemory;  // 0: no limit (--max-memory)
    std::uint64_t max_values = 0;                 // values (voxels x channels); 0: no limit (--max-voxels, deprecated)
};

// Throws FileError naming `file` when `what` ("decoding 512 float32 values", "--size: the output"),
// `values` values of `value_bytes` bytes each, passes `budget`; the one-line message gives the bytes
// needed, the budget and the option that raises it.
void check_memory_budget(const std::filesystem::path& file, const std::string& what, std::uint64_t values,
                         std::uint64_t value_bytes, const MemoryBudget& budget);

struct ReadOptions {
    NiftiGeometryRule nifti_geometry = NiftiGeometryRule::Standard;
    // Bounds data whose size the file cannot prove: compressed voxels, encoded images. Uncompressed
    // data is checked against the file's size instead.
    MemoryBudget memory;
    // Whether a detached header (.nhdr, .mhd, either half of a NIfTI pair) may bring along data
    // files outside its own folder. (--allow-outside-data-files)
    bool allow_outside_data_files = false;
    int threads = 0;  // threads a reader may use besides its own (0: every core; --threads)
    // Image files: the stored pixels, not turned by their EXIF orientation. (--keep-orientation)
    bool keep_orientation = false;
    // Scaled volumes (NIfTI, MRtrix3, DICOM): the stored values with ValueScaling::pixels_are_stored,
    // where the caller may copy them to a file that stores the scaling rather than sample them.
    bool keep_stored_values = false;
};

struct WriteOptions {
    // gzip level 0..12 for .nii.gz / .img.gz; -1: the default (4, or 1 where a trial block of the
    // data shows that level 4 buys less than 0.5 % of size: noise-like voxels)
    // (and zlib's 0..9 for PNG outputs, whose default is 4)
    int compression_level = -1;
    int quality = -1;            // 1..100 for JPEG and WebP outputs; -1: OpenCV's defaults (95, lossless WebP)
    int threads = 0;             // compression threads; 0: every core
    // Zarr outputs: the chunks' compressor, "blosc" (the default when empty), "zstd", "zlib",
    // "gzip" or "none". (--chunk-codec)
    std::string chunk_codec;
    // Zarr outputs: the 2x reductions written below the image as further multiscale levels
    // (--pyramid): 0, none; -1, until a level fits in one chunk; N, that many (at most until every
    // axis is 1 long).
    int pyramid_levels = 0;
};

// Turns an image holding stored values (ValueScaling::pixels_are_stored) into one holding the values
// (float64), as a read without keep_stored_values gives it; any other image is left as it is.
void apply_value_scaling(Image& image);
// Whether the format `file`'s name selects stores a scaling (NIfTI, MRtrix3): one that does not is
// given the values of an image holding stored values.
bool stores_value_scaling(const std::filesystem::path& file);

// Reads any supported file. Throws FileError naming the file and the problem.
Image read_image(const std::filesystem::path& file, const ReadOptions& options = {});
// Reads what describes an image without its pixels where the format allows it (volumes): kind,
// format, dtype, channels, spatial shape and geometry; `pixels` is then an empty tensor.
Image read_image_header(const std::filesystem::path& file, const ReadOptions& options = {});
// Writes atomically (see atomic_file.hpp), choosing the format by the extension. Throws
// FileError when the format cannot hold the image (e.g. float pixels in a JPEG).
void write_image(const std::filesystem::path& file, const Image& image, const WriteOptions& options = {});

// An output to be sampled into, then published. Where the format allows it (an uncompressed .nii
// whose voxels need no conversion, a .npy of numbers) the pixels are the mapped bytes of the file
// itself, created at its final size beside the target: the sampler writes the file and no buffer
// is copied into it. Otherwise they are an ordinary buffer that commit() writes with write_image.
// Either way commit() publishes atomically, and an output destroyed without commit() leaves
// nothing behind.
class PendingOutput {
public:
    // `description`: the output's kind, dtype, channels, layout, spatial shape, geometry, NIfTI
    // header and scaling, without pixels (Image::describe_like).
    // Throws FileError where `options` do not apply to the format (check_write_options).
    PendingOutput(std::filesystem::path target, Image description, WriteOptions options = {});
    // The same, for the format row the caller has already looked up, `options` checked (internal).
    PendingOutput(std::filesystem::path target, Image description, WriteOptions options, const detail::FormatHandler& format);
    ~PendingOutput();
    PendingOutput(const PendingOutput&) = delete;
    PendingOutput& operator=(const PendingOutput&) = delete;

    Image& image() { return image_; }
    bool sampled_in_place() const { return staged_ != nullptr; }
    // Writes (or finishes) the file and moves it into place; image() is empty afterwards.
    void commit();

private:
    std::filesystem::path target_;
    Image image_;
    WriteOptions options_;
    const detail::FormatHandler* format_;
    std::unique_ptr<detail::StagedOutput> staged_;  // while the pixels are a mapped file
    bool committed_ = false;
};

// Samples an output's values over a box of its spatial grid into `pixels`, a (1, C, extent...)
// view of the output's channels first_channel .. first_channel + C - 1 (all of them, or one where
// the file stores a volume per channel): `start` and `extent` outermost first, the innermost axis
// always whole. `threads` is the number of threads the call may sample with.
using WindowSampler = std::function<void(const Shape& start, const Shape& extent, std::int64_t first_channel,
                                         const TensorView& pixels, int threads)>;

// How a WindowSampler takes the channels of a file that stores a volume per channel (a 4-D
// series): Together when its positions are shared (a group of channels is then sampled in one
// call, the positions planned once for them all), Apart when each channel has positions of its own.
enum class ChannelSampling { Together, Apart };

// Samples an output and writes it atomically, as PendingOutput does. Where the format allows it (a
// NIfTI file of one image whose voxels need no conversion: .nii.gz, .hdr/.img, .img.gz) the file
// is made a block of rows at a time (of one channel where the file stores a volume per channel,
// sampled with a group of channels as `channel_sampling` allows), each block compressed (or
// written) on one thread, `options.threads` blocks at once: no buffer of the whole output is ever
// needed. Otherwise, a plain .nii among them (sampled into its own mapped pages), `sample` is
// called once for the whole grid, with `sample_threads`, into a PendingOutput, then `sampled`
// (when given) before the file is written. `description` as for PendingOutput.
// Throws FileError when `options` do not apply to the format of `file` (a quality for a PNG, a
// compression level above 9 for a PNG); write_image and write_sampled check first.
void check_write_options(const std::filesystem::path& file, const WriteOptions& options);

void write_sampled(const std::filesystem::path& target, Image description, const WriteOptions& options,
                   int sample_threads, const WindowSampler& sample, const std::function<void()>& sampled = nullptr,
                   ChannelSampling channel_sampling = ChannelSampling::Together);

// The format a path's extension selects.
FileKind kind_for_path(const std::filesystem::path& file);
// How a file of this name stores a multi-channel float image (NIfTI: a volume per channel): an
// output described in that layout is written without reordering its values.
ChannelLayout stored_channel_layout(const std::filesystem::path& file);

}  // namespace gridwarp::io
