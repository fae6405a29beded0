// gridwarp affine: warp an image, volume or tensor by an affine map, without building a grid.
#include <spdlog/spdlog.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "sampling_options.hpp"
#include "file_options.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "sample_and_write.hpp"
#include "tiled_sampling.hpp"
#include "geometry_options.hpp"
#include "gridwarp/flow.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/npy.hpp"
#include "gridwarp/io/text_matrix.hpp"

namespace gridwarp::cli {

namespace {

struct AffineCommand {
    ImageArgument input;
    OutputArgument output;
    std::filesystem::path theta;
    std::filesystem::path matrix;
    bool inverse = false;
    std::optional<double> rotate;
    std::optional<double> scale;
    std::vector<double> shift;
    std::string size;  // W,H[,D] or WxH[xD]
    std::string crop;  // X,Y[,Z],W,H[,D]
    bool expand = false;
    SamplingFlags sampling;
    VolumeFlags volume;
    TilingFlags tiling;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) { return option == "input" ? &input : nullptr; }
};

// theta for AffineGrid: a .npy (N or 1, r, r+1) as stored, or a text matrix rounded to float32
// (what an ONNX float32 theta holds), so that the result equals `gridwarp grid` + `gridwarp sample`.
Tensor read_theta(const std::filesystem::path& file, std::int64_t rank, std::int64_t batch) {
    Tensor theta;
    if (file.extension() == ".npy") {
        theta = io::read_npy(file);
        if (theta.rank() == 2) theta = std::move(theta).reshaped({1, theta.shape()[0], theta.shape()[1]});
    } else {
        const io::TextMatrix text = io::read_text_matrix(file);
        if (text.columns != static_cast<std::size_t>(rank + 1) ||
            (text.rows != static_cast<std::size_t>(rank) && text.rows != static_cast<std::size_t>(rank + 1))) {
            throw io::FileError(file, "theta is " + std::to_string(text.rows) + "x" + std::to_string(text.columns) +
                                          ", expected " + std::to_string(rank) + "x" + std::to_string(rank + 1) +
                                          " for a " + std::to_string(rank) + "-D input");
        }
        if (text.rows == static_cast<std::size_t>(rank + 1)) {
            if (!io::is_homogeneous_last_row(&text.values[static_cast<std::size_t>(rank * (rank + 1))], static_cast<std::size_t>(rank + 1))) {
                throw io::FileError(file, "the last row of a homogeneous theta must be 0 ... 0 1 (within 1e-6)");
            }
        }
        Tensor exact(DType::Float64, {1, rank, rank + 1});
        std::copy_n(text.values.begin(), rank * (rank + 1), exact.data_as<double>());
        theta = convert_to(exact.view(), DType::Float32);
    }
    if (theta.rank() != 3 || theta.shape()[1] != rank || theta.shape()[2] != rank + 1) {
        throw io::FileError(file, "theta must have shape (N, " + std::to_string(rank) + ", " + std::to_string(rank + 1) +
                                      ") for a " + std::to_string(rank) + "-D input, got " + shape_to_string(theta.shape()));
    }
    if (is_complex(theta.dtype()) || theta.dtype() == DType::String) {
        throw io::FileError(file, "theta must hold real numbers, got " + std::string(dtype_name(theta.dtype())));
    }
    // A warp by a NaN or infinite matrix is all fill: never what was meant.
    const Tensor values = convert_to(theta.view(), DType::Float64);
    for (std::int64_t i = 0; i < values.numel(); ++i) {
        if (!std::isfinite(values.data_as<double>()[i])) throw io::FileError(file, "theta holds a non-finite value (NaN or infinity)");
    }
    if (theta.shape()[0] == 1 && batch > 1) {  // one matrix for every batch item
        Tensor repeated(theta.dtype(), {batch, rank, rank + 1});
        for (std::int64_t n = 0; n < batch; ++n) {
            copy_elements(theta.view(), TensorView(theta.dtype(), static_cast<char*>(repeated.data()) +
                                                                      n * rank * (rank + 1) * dtype_size(theta.dtype()),
                                                   theta.shape()));
        }
        theta = std::move(repeated);
    }
    return theta;
}

// A pixel matrix (output pixel -> input pixel), r x (r+1), from r x (r+1) or (r+1) x (r+1) rows.
std::vector<double> read_pixel_matrix(const std::filesystem::path& file, std::int64_t rank, bool inverse) {
    const io::TextMatrix m = io::read_matrix(file);
    const auto columns = static_cast<std::size_t>(rank + 1);
    if (m.columns != columns || (m.rows != columns - 1 && m.rows != columns)) {
        throw io::FileError(file, "the matrix is " + std::to_string(m.rows) + "x" + std::to_string(m.columns) + ", expected " +
                                      std::to_string(rank) + "x" + std::to_string(rank + 1) + " or " +
                                      std::to_string(rank + 1) + "x" + std::to_string(rank + 1) + " for a " +
                                      std::to_string(rank) + "-D input");
    }
    if (m.rows == columns) {
        if (!io::is_homogeneous_last_row(&m.values[(columns - 1) * columns], columns)) {
            throw io::FileError(file, "the last row of a homogeneous matrix must be 0 ... 0 1 (within 1e-6)");
        }
    }
    std::vector<double> matrix(m.values.begin(), m.values.begin() + static_cast<std::ptrdiff_t>((columns - 1) * columns));
    for (const double value : matrix) {
        if (!std::isfinite(value)) throw io::FileError(file, "the matrix holds a non-finite value (NaN or infinity)");
    }
    if (inverse) {
        try {
            matrix = invert_affine(matrix, rank);
        } catch (const std::invalid_argument& e) {
            throw io::FileError(file, e.what());
        }
    }
    return matrix;
}

// cos and sin of an angle in degrees, exact at multiples of 90 (where std::cos(pi/2) is not 0).
std::pair<double, double> cos_sin_degrees(double degrees) {
    const double quarter_turns = degrees / 90.0;
    if (quarter_turns == std::round(quarter_turns)) {
        static constexpr double kCos[] = {1, 0, -1, 0}, kSin[] = {0, 1, 0, -1};
        const auto k = static_cast<int>(((static_cast<long long>(quarter_turns) % 4) + 4) % 4);
        return {kCos[k], kSin[k]};
    }
    const double radians = degrees * std::acos(-1.0) / 180.0;
    return {std::cos(radians), std::sin(radians)};
}

// --crop's map: output pixel p reads input pixel corner + p.
std::vector<double> crop_matrix(const std::vector<std::int64_t>& corner) {
    const auto rank = corner.size();
    std::vector<double> matrix(rank * (rank + 1), 0.0);
    for (std::size_t k = 0; k < rank; ++k) {
        matrix[k * (rank + 1) + k] = 1.0;
        matrix[k * (rank + 1) + rank] = static_cast<double>(corner[k]);
    }
    return matrix;
}

// The input pixel under output pixel 0 when the two centres coincide, x first (a half where the
// sizes differ by an odd count).
std::vector<double> centred_corner(const Shape& input_spatial, const Shape& output_spatial) {
    const std::size_t rank = input_spatial.size();
    std::vector<double> corner(rank);
    for (std::size_t k = 0; k < rank; ++k) {
        corner[k] = (static_cast<double>(input_spatial[rank - 1 - k]) - static_cast<double>(output_spatial[rank - 1 - k])) / 2.0;
    }
    return corner;
}

// The input's voxel grid with its first voxel moved to input pixel `corner` (x first).
io::Geometry canvas_geometry(const io::Geometry& geometry, const std::vector<double>& corner) {
    io::Geometry result = geometry;
    const std::size_t dimension = geometry.dimension();
    for (std::size_t i = 0; i < dimension; ++i) {
        for (std::size_t j = 0; j < dimension && j < corner.size(); ++j) {
            result.origin[i] += geometry.direction[i * dimension + j] * geometry.spacing[j] * corner[j];
        }
    }
    return result;
}

// Scale, rotate (counter-clockwise on screen, in the x-y plane) and shift about the image centre:
// the forward map is p_out = c_out + shift + R S (p_in - c_in); returned is its inverse, the
// output -> input pixel matrix.
std::vector<double> srt_matrix(const AffineCommand& command, const Shape& input_spatial, const Shape& output_spatial) {
    const auto rank = static_cast<std::int64_t>(input_spatial.size());
    const double scale = command.scale.value_or(1.0);
    if (!(scale > 0) || !std::isfinite(scale)) throw std::invalid_argument("--scale must be a positive number");
    if (!command.shift.empty() && static_cast<std::int64_t>(command.shift.size()) != rank) {
        throw std::invalid_argument("--shift needs " + std::to_string(rank) + " values for a " + std::to_string(rank) +
                                    "-D input, got " + std::to_string(command.shift.size()));
    }
    const auto [c, s] = cos_sin_degrees(command.rotate.value_or(0.0));
    // Inverse of R S is S^-1 R^T; with y pointing down, R = [[c, s], [-s, c]] turns counter-clockwise.
    std::vector<double> linear(static_cast<std::size_t>(rank * rank), 0.0);
    for (std::int64_t i = 0; i < rank; ++i) linear[static_cast<std::size_t>(i * rank + i)] = 1.0 / scale;
    if (rank >= 2) {
        linear[0] = c / scale;
        linear[1] = -s / scale;
        linear[static_cast<std::size_t>(rank)] = s / scale;
        linear[static_cast<std::size_t>(rank + 1)] = c / scale;
    }
    std::vector<double> matrix(static_cast<std::size_t>(rank * (rank + 1)));
    for (std::int64_t k = 0; k < rank; ++k) {
        const double centre_in = (static_cast<double>(input_spatial[static_cast<std::size_t>(rank - 1 - k)]) - 1.0) / 2.0;
        double translation = centre_in;
        for (std::int64_t j = 0; j < rank; ++j) {
            const double centre_out = (static_cast<double>(output_spatial[static_cast<std::size_t>(rank - 1 - j)]) - 1.0) / 2.0;
            const double shift = command.shift.empty() ? 0.0 : command.shift[static_cast<std::size_t>(j)];
            const double a = linear[static_cast<std::size_t>(k * rank + j)];
            matrix[static_cast<std::size_t>(k * (rank + 1) + j)] = a;
            translation -= a * (centre_out + shift);
        }
        matrix[static_cast<std::size_t>(k * (rank + 1) + rank)] = translation;
    }
    return matrix;
}

// --expand: the bounding box of the input's pixel edges turned and scaled, each side rounded to
// the nearest whole pixel (as vips rotate sizes its output), x first. A quarter turn swaps the sides exactly.
std::vector<std::int64_t> expanded_canvas(const AffineCommand& command, const Shape& input_spatial) {
    const std::size_t rank = input_spatial.size();
    const double scale = command.scale.value_or(1.0);
    const auto [c, s] = cos_sin_degrees(command.rotate.value_or(0.0));
    std::vector<double> extent(rank);  // x first
    for (std::size_t k = 0; k < rank; ++k) extent[k] = static_cast<double>(input_spatial[rank - 1 - k]);
    std::vector<double> box = extent;
    if (rank >= 2) {
        box[0] = std::fabs(c) * extent[0] + std::fabs(s) * extent[1];
        box[1] = std::fabs(s) * extent[0] + std::fabs(c) * extent[1];
    }
    std::vector<std::int64_t> size(rank);
    for (std::size_t k = 0; k < rank; ++k) {
        const double side = std::round(scale * box[k]);
        if (!(side <= static_cast<double>(std::int64_t{1} << 40))) {
            throw std::invalid_argument("--expand: the turned input's bounding box is too large (--scale " + std::to_string(scale) + ")");
        }
        size[k] = std::max<std::int64_t>(1, static_cast<std::int64_t>(side));
    }
    return size;
}

void run_affine(const AffineCommand& command) {
    apply_common_options(command.common);
    CommandProgress progress("affine", command.common);
    progress.phase("reading", 0, 3);
    SampleOptions options = to_sample_options(command.sampling, command.common);
    // --size alone is the canvas of an identity map about the centre: it crops or pads, as it does
    // with --rotate; resizing is `gridwarp resize`.
    const bool srt = command.rotate || command.scale || !command.shift.empty() || !command.crop.empty() ||
                     (command.theta.empty() && command.matrix.empty() && !command.size.empty());
    if (command.expand && (!(command.rotate || command.scale) || !command.size.empty() || !command.crop.empty())) {
        throw std::invalid_argument("--expand sizes the canvas of --rotate/--scale: give it with them and without --size or --crop");
    }
    const int sources = (command.theta.empty() ? 0 : 1) + (command.matrix.empty() ? 0 : 1) + (srt ? 1 : 0);
    if (sources != 1) {
        throw std::invalid_argument("give exactly one of --theta, --matrix, --rotate/--scale/--shift, --size alone (a canvas) or "
                                    "--crop (to resize, use gridwarp resize)");
    }
    if (!command.crop.empty() && (command.rotate || command.scale || !command.shift.empty() || !command.size.empty())) {
        throw std::invalid_argument("--crop cuts a box of its own size: give it without --rotate, --scale, --shift or --size");
    }
    if (command.inverse && command.matrix.empty()) throw std::invalid_argument("--inverse applies to --matrix only");
    // A non-finite angle or shift would reach integer conversions in the rotation.
    if (command.rotate && !std::isfinite(*command.rotate)) {
        throw std::invalid_argument("--rotate: expected a finite number of degrees, got " + std::to_string(*command.rotate));
    }
    for (const double shift : command.shift) {
        if (!std::isfinite(shift)) throw std::invalid_argument("--shift: expected finite numbers, got " + std::to_string(shift));
    }
    std::vector<std::filesystem::path> inputs = files_of({&command.input});
    if (!command.theta.empty()) inputs.push_back(command.theta);
    if (!command.matrix.empty()) inputs.push_back(command.matrix);
    check_output_differs(command.output, inputs);

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    // A tiled input is described from its header first; it is read whole only if it is not sampled by tiles.
    const std::unique_ptr<io::TileSource> tiles = open_input_tiles(command.input, command.output, command.tiling, read_options);
    const std::shared_ptr<const io::Image> loaded_input =
        tiles ? std::make_shared<const io::Image>(tiles->describe()) : load_image(command.input, read_options);
    const io::Image& input = *loaded_input;
    report_warnings(input);
    warn_if_label_map(command.input.path, input, options);
    const auto rank = static_cast<std::int64_t>(input.spatial.size());
    set_gaussian_sigma(options, command.sampling, input.geometry ? input.geometry->spacing : std::vector<double>{}, rank);
    try {
        check_taps_per_point(options.mode, options.spline_order, rank);
    } catch (const std::invalid_argument& e) {
        throw io::FileError(command.input.path, e.what());
    }
    spdlog::debug("input {}: {} {}, {} channel(s), size {}", command.input.string(), io::file_kind_name(input.kind),
                  dtype_name(input.dtype()), input.channels, image_size_text(input.spatial));

    Shape output_spatial = input.spatial;
    std::vector<std::int64_t> crop_corner;  // x first
    if (!command.size.empty() || !command.crop.empty() || command.expand) {
        std::vector<std::int64_t> size;  // x first
        if (command.expand) {
            size = expanded_canvas(command, input.spatial);
        } else if (!command.crop.empty()) {
            const std::vector<std::int64_t> box = parse_integer_list("--crop", command.crop, static_cast<std::size_t>(2 * rank));
            crop_corner.assign(box.begin(), box.begin() + rank);
            size.assign(box.begin() + rank, box.end());
        } else {
            size = parse_integer_list("--size", command.size, static_cast<std::size_t>(rank));
        }
        for (const auto extent : size) {
            if (extent < 1) {
                throw std::invalid_argument((command.crop.empty() ? "--size" : "--crop") + std::string(": expected positive sizes, got ") +
                                            std::to_string(extent));
            }
        }
        output_spatial.assign(size.rbegin(), size.rend());  // W,H,D -> (D, H, W)
        check_output_size(command.output.path, command.expand ? "--expand" : command.crop.empty() ? "--size" : "--crop", size,
                          static_cast<std::uint64_t>(input.batch * input.channels), dtype_size(input.dtype()),
                          to_memory_budget(command.volume.memory));
    }

    std::unique_ptr<PositionSource> positions;
    Tensor theta;
    std::string mapping;  // for --explain
    if (!command.theta.empty()) {
        theta = read_theta(command.theta, rank, input.batch);
        positions = std::make_unique<AffinePositions>(theta.view(), output_spatial, options.align_corners);
        const Tensor first = convert_to(theta.view(), DType::Float64);
        mapping = "theta " + describe_rows(std::vector<double>(first.data_as<double>(), first.data_as<double>() + rank * (rank + 1)),
                                           static_cast<std::size_t>(rank), static_cast<std::size_t>(rank + 1)) +
                  " (normalized, as ONNX AffineGrid; the first of " + std::to_string(theta.shape()[0]) + ")";
    } else {
        const std::vector<double> matrix = !command.matrix.empty() ? read_pixel_matrix(command.matrix, rank, command.inverse)
                                           : !crop_corner.empty()  ? crop_matrix(crop_corner)
                                                                   : srt_matrix(command, input.spatial, output_spatial);
        std::vector<double> per_batch;
        for (std::int64_t n = 0; n < input.batch; ++n) per_batch.insert(per_batch.end(), matrix.begin(), matrix.end());
        positions = std::make_unique<AffinePositions>(per_batch, input.batch, output_spatial, options.align_corners,
                                                      DType::Float64, CoordinateSpace::Pixel);
        mapping = describe_rows(matrix, static_cast<std::size_t>(rank), static_cast<std::size_t>(rank + 1)) +
                  " (output pixel -> input pixel, x first)";
    }

    io::Image description = io::Image::describe_like(input, output_spatial);
    if (input.geometry) {
        // The pixel-space maps keep the input's voxel grid, moved to the canvas (or box) they cut from
        // it; theta and --matrix with another size cover the input's extent, as before.
        if (srt) {
            description.geometry = canvas_geometry(*input.geometry, !crop_corner.empty()
                                                                        ? std::vector<double>(crop_corner.begin(), crop_corner.end())
                                                                        : centred_corner(input.spatial, output_spatial));
        } else {
            description.geometry = output_spatial == input.spatial
                                       ? *input.geometry
                                       : io::resampled_geometry(*input.geometry, input.spatial, output_spatial, options.align_corners);
        }
    }
    check_sampling_work(command.sampling, options, input.nchw(), positions->output_shape());
    const AntialiasPlan antialias = plan_antialias(command.sampling, options, *positions, input.spatial, input.dtype());
    if (command.sampling.explain) {
        Explanation explanation("affine");
        explanation.add("input", command.input.string() + " (" + describe_image(input) + ")");
        explanation.add("mapping", mapping);
        explanation.add("sampling", describe_sampling(options));
        explanation.add("anti-aliasing", antialias.explanation);
        if (tiles) {
            const bool by_tiles = samples_by_tiles(*tiles, command.tiling, options, input.dtype(), *positions);
            explanation.add("tiles", by_tiles ? "the output a tile at a time, within --working-memory" : "none: the input is read whole");
        }
        explanation.add("output", command.output.string() + ", size " + image_size_text(output_spatial));
        if (description.geometry) explanation.add("output grid", describe_geometry(*description.geometry));
        explanation.print();
        return;
    }
    if (tiles && samples_by_tiles(*tiles, command.tiling, options, input.dtype(), *positions)) {
        sample_by_tiles(command.output, command.input.path, *tiles, description, to_write_options(command.volume, command.common), *positions,
                        options, antialias, command.tiling, &progress);
        return;
    }
    const std::shared_ptr<const io::Image> whole_input = tiles ? load_image(command.input, read_options) : loaded_input;
    Tensor filtered;
    const ConstTensorView pixels = input_to_sample(whole_input->nchw(), antialias, options, false, command.input.path,
                                                   to_memory_budget(command.volume.memory), filtered);
    sample_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), pixels, *positions, options,
                     &progress);
}

}  // namespace

CommandBinding register_affine_command(CLI::App& app) {
    auto command = std::make_shared<AffineCommand>();
    CLI::App* sub = app.add_subcommand("affine", "Warp an image, volume or tensor by an affine map");
    sub->add_option("-i,--input", command->input, "Image (.png, .jpg, .tif, ...), volume (.nii[.gz], .nrrd, .mha, ...) or .npy")
        ->required();
    sub->add_option("-o,--output", command->output, "Output file; its extension picks the format")->required();
    sub->add_option("--theta", command->theta, "Normalized 2x3 / 3x4 matrix exactly as ONNX AffineGrid (text or .npy)");
    sub->add_option("--matrix", command->matrix,
                    "Pixel-space matrix mapping output pixels to input pixels (2x3/3x3 images, 3x4/4x4 volumes; text or .npy)");
    sub->add_flag("--inverse", command->inverse, "The --matrix maps input pixels to output pixels (OpenCV's default)");
    sub->add_option("--rotate", command->rotate, "Rotate by DEG degrees counter-clockwise (as seen on screen) about the centre");
    sub->add_option("--scale", command->scale, "Scale by S about the centre");
    sub->add_option("--shift", command->shift, "Then shift by X,Y[,Z] output pixels")->delimiter(',');
    sub->add_option("--size", command->size,
                    "Output canvas W,H[,D] or WxH[xD], centred on the input's centre (default: the input's size); alone it "
                    "crops or pads the centre. To resize, use gridwarp resize");
    sub->add_option("--crop", command->crop, "Cut the box X,Y[,Z],W,H[,D] (input pixels, x first: the corner, then the size)");
    sub->add_flag("--expand", command->expand,
                  "With --rotate/--scale: the canvas is the bounding box of the turned input (sides rounded to whole pixels, "
                  "as vips rotate), centred, so no corner is cut");
    add_sampling_options(*sub, command->sampling);
    add_antialias_option(*sub, command->sampling, "off");
    add_volume_options(*sub, command->volume, true);
    add_tiling_options(*sub, command->tiling);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp affine -i photo.png -o turned.png --rotate 30 --scale 1.2 --mode cubic\n"
        "  gridwarp affine -i slide.tif -o turned.tif --rotate 10     # a tiled slide larger than memory, by tiles\n"
        "  gridwarp affine -i photo.png -o whole.png --rotate 30 --expand     # the canvas grows to keep the corners\n"
        "  gridwarp affine -i photo.jpg -o out.jpg --matrix M.txt --inverse     # OpenCV warpAffine's M\n"
        "  gridwarp affine -i brain.nii.gz -o turned.nii.gz --rotate 15 --mode cubic\n"
        "  gridwarp affine -i photo.png -o centre.png --size 640x480        # the centre 640x480, padded where smaller\n"
        "  gridwarp affine -i photo.png -o face.png --crop 120,40,200,260   # the box at x 120, y 40, 200 wide, 260 high\n"
        "  gridwarp affine -i X.npy -o Y.npy --theta theta.npy --align-corners --antialias off   # = grid + sample");
    return set_command_action(*sub, command, run_affine);
}

}  // namespace gridwarp::cli
