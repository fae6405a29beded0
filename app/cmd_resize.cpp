// gridwarp resize: an image or volume onto a grid of another size, scale or voxel size, covering
// the same field of view: edge-clamped and anti-aliased by default.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "sampling_options.hpp"
#include "file_options.hpp"
#include "image_arguments.hpp"
#include "messages.hpp"
#include "sample_and_write.hpp"
#include "tiled_sampling.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

namespace {

struct ResizeCommand {
    ImageArgument input;
    OutputArgument output;
    std::string size;
    std::string scale;
    std::string voxel_size;
    std::string fit;
    SamplingFlags sampling;
    TilingFlags tiling;
    VolumeFlags volume;
    CommonOptions common;

    ImageArgument* image_argument(std::string_view option) { return option == "input" ? &input : nullptr; }
};

// "W,H[,D]" or "WxH[xD]", or one value for every axis where `one_for_all`: numbers, x first.
std::vector<double> parse_list(const std::string& option, const std::string& text, std::size_t rank, bool one_for_all) {
    std::vector<double> values;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, text.find(',') != std::string::npos ? ',' : 'x')) {
        const bool percent = !item.empty() && item.back() == '%';
        if (percent) item.pop_back();
        std::size_t used = 0;
        double value = 0;
        try {
            value = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || !std::isfinite(value) || value <= 0) {
            throw std::invalid_argument(option + ": expected positive numbers (W,H[,D] or WxH[xD]), got '" + text + "'");
        }
        values.push_back(percent ? value / 100.0 : value);
    }
    if (one_for_all && values.size() == 1) values.assign(rank, values.front());
    if (values.size() != rank) {
        throw std::invalid_argument(option + ": expected " + std::to_string(rank) + " values for a " + std::to_string(rank) +
                                    "-D input" + (one_for_all ? " (or one for all axes)" : "") + ", got '" + text + "'");
    }
    return values;
}

// --size: "W,H[,D]" or "WxH[xD]", where all but one axis may be left empty ("512x", "x512",
// "256xx"): those take the given axis' factor, rounded half away from zero, at least 1.
std::vector<double> parse_size(const std::string& text, const std::vector<double>& extents) {
    const std::size_t rank = extents.size();
    const char separator = text.find(',') != std::string::npos ? ',' : 'x';
    std::vector<std::string> items{""};
    for (const char c : text) {
        if (c == separator) {
            items.emplace_back();
        } else {
            items.back() += c;
        }
    }
    const auto given = static_cast<std::size_t>(std::count_if(items.begin(), items.end(), [](const std::string& item) { return !item.empty(); }));
    if (items.size() != rank || given == 0 || (given != rank && given != 1)) {
        throw std::invalid_argument("--size: expected " + std::to_string(rank) + " sizes for a " + std::to_string(rank) +
                                    "-D input, or one with the others left empty to keep the aspect (" +
                                    (rank == 2 ? "512x or x512" : "256xx") + "), got '" + text + "'");
    }
    std::string joined;
    for (const auto& item : items) {
        if (!item.empty()) joined += (joined.empty() ? "" : ",") + item;
    }
    const std::vector<double> values = parse_list("--size", joined, given, false);
    if (given == rank) return values;
    const std::size_t axis = static_cast<std::size_t>(std::find_if(items.begin(), items.end(), [](const std::string& item) { return !item.empty(); }) - items.begin());
    const double factor = values.front() / extents[axis];
    std::vector<double> sizes(rank);
    for (std::size_t k = 0; k < rank; ++k) sizes[k] = k == axis ? values.front() : std::max(1.0, std::round(extents[k] * factor));
    return sizes;
}

// --fit: the largest size inside the box that keeps the aspect (the axis that fills its side first
// gets it exactly; the others extent x factor, rounded half away from zero, at least 1).
std::vector<double> fit_in_box(const std::string& text, const std::vector<double>& extents) {
    const std::vector<double> box = parse_list("--fit", text, extents.size(), false);
    double factor = box.front() / extents.front();
    for (std::size_t k = 0; k < box.size(); ++k) factor = std::min(factor, box[k] / extents[k]);
    std::vector<double> sizes(box.size());
    for (std::size_t k = 0; k < box.size(); ++k) sizes[k] = std::clamp(std::round(extents[k] * factor), 1.0, box[k]);
    return sizes;
}

// Along each axis (x first) output index j reads input index a j + b.
struct AxisMap {
    std::vector<std::int64_t> size;
    std::vector<double> step, start;
};

AxisMap plan_resize(const ResizeCommand& command, const io::Image& input, bool align_corners) {
    const std::size_t rank = input.spatial.size();
    AxisMap map;
    std::vector<double> extents(rank);
    for (std::size_t k = 0; k < rank; ++k) extents[k] = static_cast<double>(input.spatial[rank - 1 - k]);
    if (!command.voxel_size.empty()) {
        if (!input.geometry) {
            throw io::FileError(command.input.path, "--voxel-size needs a volume with a voxel size; use --size or --scale for images");
        }
        const std::vector<double> voxel = parse_list("--voxel-size", command.voxel_size, rank, true);
        for (std::size_t k = 0; k < rank; ++k) {
            const double spacing = input.geometry->spacing[k];
            // mrgrid's count: extent / voxel rounded with ties down (16.5 -> 16), at least 1.
            const double size = std::max(1.0, std::ceil(extents[k] * spacing / voxel[k] - 0.5));
            const double step = voxel[k] / spacing;
            map.size.push_back(static_cast<std::int64_t>(size));
            map.step.push_back(step);
            map.start.push_back((extents[k] - 1.0) / 2.0 - step * (size - 1.0) / 2.0);  // centres on centres
        }
        return map;
    }
    const bool by_scale = !command.scale.empty();
    const std::vector<double> sizes = by_scale              ? parse_list("--scale", command.scale, rank, true)
                                      : command.fit.empty() ? parse_size(command.size, extents)
                                                            : fit_in_box(command.fit, extents);
    for (std::size_t k = 0; k < rank; ++k) {
        const double size = by_scale ? std::max(1.0, std::round(extents[k] * sizes[k])) : sizes[k];
        if (size != std::floor(size)) throw std::invalid_argument("--size: expected whole numbers of pixels, got '" + command.size + "'");
        map.size.push_back(static_cast<std::int64_t>(size));
        if (align_corners) {
            map.step.push_back(size > 1 ? (extents[k] - 1.0) / (size - 1.0) : 0.0);
            map.start.push_back(size > 1 ? 0.0 : (extents[k] - 1.0) / 2.0);
        } else {
            const double step = extents[k] / size;
            map.step.push_back(step);
            map.start.push_back((step - 1.0) / 2.0);  // the outer edges stay where they are
        }
    }
    return map;
}

void run_resize(const ResizeCommand& command) {
    apply_common_options(command.common);
    CommandProgress progress("resize", command.common);
    progress.phase("reading", 0, 3);
    const int given = (command.size.empty() ? 0 : 1) + (command.scale.empty() ? 0 : 1) + (command.voxel_size.empty() ? 0 : 1) +
                      (command.fit.empty() ? 0 : 1);
    if (given != 1) throw std::invalid_argument("give exactly one of --size, --fit, --scale or --voxel-size");
    SampleOptions options = to_sample_options(command.sampling, command.common);
    check_output_differs(command.output, files_of({&command.input}));

    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    // A tiled input is described from its header first; it is read whole only if it is not resized by tiles.
    const std::unique_ptr<io::TileSource> tiles = open_input_tiles(command.input, command.output, command.tiling, read_options);
    const std::shared_ptr<const io::Image> loaded_input =
        tiles ? std::make_shared<const io::Image>(tiles->describe()) : load_image(command.input, read_options);
    const io::Image& input = *loaded_input;
    report_warnings(input);
    warn_if_label_map(command.input.path, input, options);
    const auto rank = static_cast<std::int64_t>(input.spatial.size());
    set_gaussian_sigma(options, command.sampling, input.geometry ? input.geometry->spacing : std::vector<double>{}, rank);
    AxisMap map;
    try {
        map = plan_resize(command, input, options.align_corners);
    } catch (const std::invalid_argument& e) {
        throw ExitStatus(2, e.what());  // a value the command line got wrong, as CLI11's own checks
    }
    Shape output_spatial(map.size.rbegin(), map.size.rend());
    check_output_size(command.output.path,
                      !command.size.empty() ? "--size" : !command.fit.empty() ? "--fit" : !command.scale.empty() ? "--scale" : "--voxel-size", map.size,
                      static_cast<std::uint64_t>(input.batch * input.channels), dtype_size(input.dtype()),
                      to_memory_budget(command.volume.memory));

    std::vector<double> matrix;  // output pixel -> input pixel, x first, per batch item
    for (std::int64_t n = 0; n < input.batch; ++n) {
        for (std::int64_t k = 0; k < rank; ++k) {
            for (std::int64_t j = 0; j < rank; ++j) matrix.push_back(j == k ? map.step[static_cast<std::size_t>(k)] : 0.0);
            matrix.push_back(map.start[static_cast<std::size_t>(k)]);
        }
    }
    const AffinePositions positions(matrix, input.batch, output_spatial, options.align_corners, DType::Float64, CoordinateSpace::Pixel);

    io::Image description = io::Image::describe_like(input, output_spatial);
    if (input.geometry) {
        io::Geometry geometry = *input.geometry;
        const std::size_t d = geometry.dimension();
        for (std::size_t k = 0; k < d; ++k) geometry.spacing[k] = input.geometry->spacing[k] * map.step[k];
        for (std::size_t i = 0; i < d; ++i) {
            for (std::size_t k = 0; k < d; ++k) {
                geometry.origin[i] += input.geometry->direction[i * d + k] * input.geometry->spacing[k] * map.start[k];
            }
        }
        description.geometry = geometry;
    }
    check_sampling_work(command.sampling, options, input.nchw(), positions.output_shape());
    const AntialiasPlan antialias = plan_antialias(command.sampling, options, positions, input.spatial, input.dtype());
    // By tiles: a composable shrink through shrink_onto_grid's weights, anything else through positions.
    const auto by_tiles = [&] {
        if (antialias.filters && shrinks_onto_grid(options, input.dtype())) {
            return shrinks_by_tiles(*tiles, command.tiling, options, input.dtype(), output_spatial);
        }
        return samples_by_tiles(*tiles, command.tiling, options, input.dtype(), positions);
    };
    if (command.sampling.explain) {
        Explanation explanation("resize");
        explanation.add("input", command.input.string() + " (" + describe_image(input) + ")");
        explanation.add("mapping", describe_rows(std::vector<double>(matrix.begin(), matrix.begin() + rank * (rank + 1)),
                                                 static_cast<std::size_t>(rank), static_cast<std::size_t>(rank + 1)) +
                                       " (output pixel -> input pixel, x first)");
        explanation.add("sampling", describe_sampling(options));
        explanation.add("anti-aliasing", antialias.explanation);
        if (tiles) explanation.add("tiles", by_tiles() ? "the output a tile at a time, within --working-memory" : "none: the input is read whole");
        explanation.add("output", command.output.string() + ", size " + image_size_text(output_spatial));
        if (description.geometry) explanation.add("output grid", describe_geometry(*description.geometry));
        explanation.print();
        return;
    }
    const AxisAlignedMap grid{output_spatial, std::vector<double>(map.step.rbegin(), map.step.rend()),
                              std::vector<double>(map.start.rbegin(), map.start.rend())};
    const bool shrinks = antialias.filters && shrinks_onto_grid(options, input.dtype());
    if (tiles && by_tiles()) {
        if (shrinks) {
            shrink_by_tiles(command.output, command.input.path, *tiles, description, to_write_options(command.volume, command.common), grid,
                            antialias.factors, positions, options, command.tiling, &progress);
        } else {
            sample_by_tiles(command.output, command.input.path, *tiles, description, to_write_options(command.volume, command.common), positions,
                            options, antialias, command.tiling, &progress);
        }
        return;
    }
    const std::shared_ptr<const io::Image> whole_input = tiles ? load_image(command.input, read_options) : loaded_input;
    if (shrinks) {
        shrink_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), whole_input->nchw(), grid,
                         antialias.factors, options, &progress);
        return;
    }
    Tensor filtered;
    const ConstTensorView pixels = input_to_sample(whole_input->nchw(), antialias, options, false, command.input.path,
                                               to_memory_budget(command.volume.memory), filtered);
    sample_and_write(command.output, std::move(description), to_write_options(command.volume, command.common), pixels, positions, options,
                     &progress);
}

}  // namespace

CommandBinding register_resize_command(CLI::App& app) {
    auto command = std::make_shared<ResizeCommand>();
    command->sampling.padding = "border";  // the edge pixels, not black, beyond the outermost centres
    CLI::App* sub = app.add_subcommand("resize", "Resize an image or volume to a size, a scale or a voxel size, same field of view");
    sub->add_option("-i,--input", command->input, "Image, volume or .npy tensor")->required();
    sub->add_option("-o,--output", command->output, "Output file; its extension picks the format")->required();
    sub->add_option("--size", command->size,
                    "Output size W,H[,D] (or WxH[xD]) in pixels; leave all but one empty to keep the aspect: 512x, x512");
    sub->add_option("--fit", command->fit,
                    "The largest size inside the box WxH[xD] that keeps the aspect (as displayed: EXIF orientation applied); "
                    "enlarges too");
    sub->add_option("--scale", command->scale, "Factor or percentage, one for all axes or one per axis: 0.5, 50%, 2,2,1");
    sub->add_option("--voxel-size", command->voxel_size,
                    "Voxel size in mm, one for all axes or X,Y,Z: the grid keeps the field of view centred (volumes)");
    add_sampling_options(*sub, command->sampling);
    add_antialias_option(*sub, command->sampling, "auto");
    add_volume_options(*sub, command->volume, true);
    add_tiling_options(*sub, command->tiling);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp resize -i photo.jpg -o thumb.jpg --size 320x240\n"
        "  gridwarp resize -i photo.jpg -o long_side_512.jpg --fit 512x512\n"
        "  gridwarp resize -i photo.jpg -o width_800.jpg --size 800x\n"
        "  gridwarp resize -i photo.jpg -o half.jpg --scale 50%\n"
        "  gridwarp resize -i t1.nii.gz -o t1_2mm.nii.gz --voxel-size 2 --mode cubic\n"
        "  gridwarp resize -i labels.nii.gz -o labels_1mm.nii.gz --voxel-size 1 --mode GenericLabel");
    return set_command_action(*sub, command, run_resize);
}

}  // namespace gridwarp::cli
