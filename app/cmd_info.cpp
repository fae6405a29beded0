// gridwarp info: what a file holds, as text or one JSON object.
#include <nlohmann/json.hpp>

#include <cmath>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.hpp"
#include "file_options.hpp"
#include "messages.hpp"
#include "gridwarp/io/flow_io.hpp"
#include "gridwarp/io/dicom.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::cli {

namespace {

struct InfoCommand {
    std::filesystem::path file;
    std::filesystem::path moving, reference;  // for transforms defined through their images
    bool json = false;
    VolumeFlags volume;
    CommonOptions common;
};

struct ValueRange {
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    std::int64_t non_finite = 0;
    bool numeric = true;
};

// Scans a buffer in its own type (no float64 copy of a volume). `values` is the whole storage of
// the image, in any layout: the range does not depend on the order.
ValueRange value_range(DType dtype, const void* data, std::int64_t count) {
    ValueRange range;
    if (dtype == DType::String || is_complex(dtype)) {
        range.numeric = false;
        return range;
    }
    if (dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Bool) {
        const Tensor values = convert_to(ConstTensorView(dtype, data, {count}), DType::Float64);
        return value_range(DType::Float64, values.data(), count);
    }
    visit_dtype(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_arithmetic_v<T>) {
            const T* values = static_cast<const T*>(data);
            T low = std::numeric_limits<T>::max(), high = std::numeric_limits<T>::lowest();
            std::int64_t finite = 0;
            for (std::int64_t i = 0; i < count; ++i) {
                const T v = values[i];
                if constexpr (std::is_floating_point_v<T>) {
                    if (!std::isfinite(v)) {
                        ++range.non_finite;
                        continue;
                    }
                }
                low = std::min(low, v);
                high = std::max(high, v);
                ++finite;
            }
            if (finite > 0) {
                range.min = static_cast<double>(low);
                range.max = static_cast<double>(high);
            }
        }
    });
    return range;
}

// Sizes innermost-first (W, H, D), the order image tools print them in.
std::vector<std::int64_t> size_innermost_first(const Shape& spatial) { return std::vector<std::int64_t>(spatial.rbegin(), spatial.rend()); }

std::string joined(const std::vector<double>& values, const char* separator) {
    std::ostringstream out;
    out.precision(10);
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? separator : "") << values[i] + 0.0;  // no "-0"
    return out.str();
}

bool has_suffix(const std::string& name, const char* suffix) {
    const std::string tail(suffix);
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_transform_file(std::string name) {
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* suffix : {".tfm", ".h5", ".hdf5", ".mat", ".txt", ".lta", ".1d"}) {
        if (has_suffix(name, suffix)) return true;
    }
    return false;
}

// The whole chain as one map from reference RAS points to moving RAS points, when it is affine.
std::optional<AffineMap> reference_ras_to_moving_ras(const io::TransformFile& transform, std::size_t dimension) {
    AffineMap chain = AffineMap::identity(dimension);
    for (const auto& step : transform.steps) {
        if (!step.affine) return std::nullopt;
        chain = chain.after(*step.affine);
    }
    // LPS -> RAS on both sides: x and y change sign.
    for (std::size_t i = 0; i < dimension; ++i) {
        const double row_sign = i < 2 ? -1.0 : 1.0;
        for (std::size_t j = 0; j < dimension; ++j) chain.matrix[i * dimension + j] *= row_sign * (j < 2 ? -1.0 : 1.0);
        chain.offset[i] *= row_sign;
    }
    return chain;
}

// A transform file: its dimension and steps (3-D tried first, then 2-D, unless images say), and the
// resolved reference-RAS to moving-RAS matrix.
void describe_transform(const InfoCommand& command) {
    const io::TransformSpec spec = io::parse_transform_spec(command.file.string());
    const io::ReadOptions read_options = to_read_options(command.volume, command.common);
    std::optional<io::Image> moving, reference;
    if (!command.moving.empty()) moving = io::read_image_header(command.moving, read_options);
    if (!command.reference.empty()) reference = io::read_image_header(command.reference, read_options);
    io::TransformContext context;
    context.moving = moving ? &*moving : reference ? &*reference : nullptr;
    context.reference = reference ? &*reference : context.moving;
    context.moving_file = command.moving;
    context.reference_file = command.reference;
    io::TransformFile transform;
    std::size_t dimension = 3;
    if (context.moving) {
        dimension = context.moving->spatial.size();
        context.dimension = dimension;
        transform = io::read_transform(spec, context, read_options);
    } else {
        try {
            transform = io::read_transform(spec, context, read_options);
        } catch (const io::FileError&) {
            // A file that is no 2-D transform either is reported by its 3-D reading's error.
            const std::exception_ptr as_3d = std::current_exception();
            dimension = 2;
            context.dimension = 2;
            try {
                transform = io::read_transform(spec, context, read_options);
            } catch (const io::FileError&) {
                std::rethrow_exception(as_3d);
            }
        }
    }
    const std::optional<AffineMap> resolved = reference_ras_to_moving_ras(transform, dimension);
    auto rows_of = [dimension](const AffineMap& map) {
        std::vector<std::vector<double>> rows;
        for (std::size_t i = 0; i < dimension; ++i) {
            std::vector<double> row(map.matrix.begin() + static_cast<std::ptrdiff_t>(i * dimension),
                                    map.matrix.begin() + static_cast<std::ptrdiff_t>((i + 1) * dimension));
            row.push_back(map.offset[i]);
            rows.push_back(std::move(row));
        }
        return rows;
    };
    nlohmann::ordered_json info;
    info["file"] = command.file.string();
    info["kind"] = "transform";
    info["dimension"] = dimension;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& step : transform.steps) {
        nlohmann::ordered_json entry;
        if (step.affine) {
            entry["type"] = "affine";
            nlohmann::json rows = nlohmann::json::array();
            for (std::size_t i = 0; i < dimension; ++i) {
                rows.push_back(std::vector<double>(step.affine->matrix.begin() + static_cast<std::ptrdiff_t>(i * dimension),
                                                   step.affine->matrix.begin() + static_cast<std::ptrdiff_t>((i + 1) * dimension)));
            }
            entry["matrix"] = rows;
            entry["offset"] = step.affine->offset;
        } else {
            entry["type"] = step.field->bspline_order() > 0 ? "B-spline" : "displacement field";
        }
        steps.push_back(entry);
    }
    info["steps"] = steps;
    if (resolved) info["reference_ras_to_moving_ras"] = rows_of(*resolved);
    if (command.json) {
        std::cout << info.dump() << "\n";
        return;
    }
    std::cout << "file:      " << command.file.string() << "\n";
    std::cout << "kind:      transform, " << dimension << "-D, " << transform.steps.size()
              << " step(s), maps reference points to moving points (LPS mm); the last step acts first\n";
    for (std::size_t k = 0; k < transform.steps.size(); ++k) {
        const auto& step = transform.steps[k];
        if (!step.affine) {
            std::cout << "step " << k + 1 << ":    " << (step.field->bspline_order() > 0 ? "B-spline transform" : "displacement field") << "\n";
            continue;
        }
        for (std::size_t i = 0; i < dimension; ++i) {
            std::vector<double> row(step.affine->matrix.begin() + static_cast<std::ptrdiff_t>(i * dimension),
                                    step.affine->matrix.begin() + static_cast<std::ptrdiff_t>((i + 1) * dimension));
            row.push_back(step.affine->offset[i]);
            std::cout << (i == 0 ? "step " + std::to_string(k + 1) + ":    [" : std::string("           [")) << joined(row, ", ") << "]\n";
        }
    }
    if (resolved) {
        const auto rows = rows_of(*resolved);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            std::cout << (i == 0 ? "RAS map:   [" : "           [") << joined(rows[i], ", ") << "]"
                      << (i == 0 ? "   (the whole file: reference RAS -> moving RAS)" : "") << "\n";
        }
    }
}

void describe_image_file(const InfoCommand& command);

// A folder of DICOM files holding several series: each listed, to be named as FOLDER,series=UID.
// Returns false for a folder of one series, which is described as any image is.
bool list_dicom_folder(const InfoCommand& command) {
    std::error_code error;
    if (!std::filesystem::is_directory(command.file, error)) return false;  // FOLDER,series=UID names one
    const std::vector<io::DicomSeriesSummary> series = io::list_dicom_series(command.file);
    if (series.size() == 1) return false;
    nlohmann::ordered_json listing = nlohmann::ordered_json::array();
    for (const io::DicomSeriesSummary& one : series) {
        listing.push_back({{"uid", one.uid},
                           {"description", one.description},
                           {"size", {one.columns, one.rows, one.slices}},
                           {"orientation", one.orientation}});
    }
    if (command.json) {
        std::cout << nlohmann::ordered_json{{"file", command.file.string()}, {"kind", "dicom folder"}, {"series", listing}}.dump() << "\n";
        return true;
    }
    std::cout << "file:      " << command.file.string() << "\n";
    std::cout << "kind:      DICOM folder of " << series.size() << " series (read one as " << command.file.string() << ",series=UID)\n";
    for (const io::DicomSeriesSummary& one : series) {
        std::cout << "series:    " << one.uid << "  '" << one.description << "'  " << one.columns << " x " << one.rows << " x " << one.slices
                  << "  " << one.orientation << "\n";
    }
    return true;
}

void run_info(const InfoCommand& command) {
    apply_common_options(command.common);
    if (io::names_dicom_folder(command.file)) {
        if (!list_dicom_folder(command)) describe_image_file(command);
        return;
    }
    if (is_transform_file(io::parse_transform_spec(command.file.string()).file.filename().string()) ||
        command.file.string() != io::parse_transform_spec(command.file.string()).file.string() || !command.moving.empty() ||
        !command.reference.empty()) {
        return describe_transform(command);
    }
    describe_image_file(command);
}

void describe_image_file(const InfoCommand& command) {
    nlohmann::ordered_json info;
    info["file"] = command.file.string();
    const std::string name = command.file.filename().string();
    const bool is_flo = name.size() > 4 && name.compare(name.size() - 4, 4, ".flo") == 0;

    std::optional<io::Geometry> geometry;
    std::shared_ptr<const io::NiftiHeader> nifti;
    ValueRange range;
    if (is_flo) {
        const io::FlowField flow = io::read_flow(command.file);
        const Shape& shape = flow.field.shape();
        info["kind"] = "flow";
        info["format"] = flow.format;
        info["size"] = size_innermost_first(Shape(shape.begin() + 1, shape.end() - 1));
        info["batch"] = shape[0];
        info["channels"] = shape.back();
        info["dtype"] = std::string(dtype_name(flow.field.dtype()));
        range = value_range(flow.field.dtype(), flow.field.data(), flow.field.numel());
    } else {
        const io::Image image = io::read_image(command.file, to_read_options(command.volume, command.common));
        report_warnings(image);
        info["kind"] = std::string(io::file_kind_name(image.kind));
        info["format"] = image.format;
        info["size"] = size_innermost_first(image.spatial);
        info["batch"] = image.batch;
        info["channels"] = image.channels;
        if (!image.channel_order.empty()) info["channel_order"] = image.channel_order;
        if (image.pages > 1) info["pages"] = image.pages;
        // A NIfTI series: its volumes are the channels; the fourth pixdim is the TR.
        if (image.nifti && image.nifti->dim[0] >= 4 && image.nifti->dim[4] > 1 && image.nifti->dim[4] == image.channels) {
            const int time_units = image.nifti->xyzt_units & 0x38;
            const char* unit = time_units == 8 ? "s" : time_units == 16 ? "ms" : time_units == 24 ? "us" : "";
            info["time"] = {{"volumes", image.nifti->dim[4]}, {"tr", image.nifti->pixdim[4]}, {"tr_unit", unit}};
        }
        if (image.exif_orientation != 0) {
            info["exif_orientation"] = image.exif_orientation;
            info["exif_orientation_applied"] = !command.volume.keep_orientation && image.exif_orientation > 1 && image.format.rfind("tif", 0) != 0;
        }
        info["dtype"] = std::string(dtype_name(image.dtype()));
        range = value_range(image.dtype(), image.pixels.data(), image.pixels.numel());
        geometry = image.geometry;
        nifti = image.nifti;
        if (image.scaling) {
            info["stored_dtype"] = std::string(dtype_name(image.scaling->stored));
            info["scl_slope"] = image.scaling->slope;
            info["scl_inter"] = image.scaling->inter;
        }
    }
    if (range.numeric && range.min <= range.max) info["range"] = {range.min, range.max};
    if (range.non_finite > 0) info["non_finite_values"] = range.non_finite;
    if (geometry) {
        info["spacing"] = geometry->spacing;
        info["origin"] = geometry->origin;
        const std::size_t d = geometry->dimension();
        nlohmann::json direction = nlohmann::json::array();
        for (std::size_t i = 0; i < d; ++i) {
            direction.push_back(std::vector<double>(geometry->direction.begin() + static_cast<std::ptrdiff_t>(i * d),
                                                    geometry->direction.begin() + static_cast<std::ptrdiff_t>((i + 1) * d)));
        }
        info["direction"] = direction;
    }
    if (nifti) {
        nlohmann::ordered_json header;
        header["version"] = nifti->version;
        header["byte_order"] = nifti->big_endian ? "big-endian" : "little-endian";
        header["dim"] = std::vector<std::int64_t>(nifti->dim.begin(), nifti->dim.begin() + nifti->dim[0] + 1);
        header["pixdim"] = std::vector<double>(nifti->pixdim.begin(), nifti->pixdim.begin() + nifti->dim[0] + 1);
        header["datatype"] = nifti->datatype;
        header["qform_code"] = nifti->qform_code;
        header["sform_code"] = nifti->sform_code;
        header["xyzt_units"] = nifti->xyzt_units;
        header["intent_code"] = nifti->intent_code;
        header["intent_p"] = {nifti->intent_p1, nifti->intent_p2, nifti->intent_p3};
        header["intent_name"] = nifti->intent_name;
        header["descrip"] = nifti->descrip;
        header["aux_file"] = nifti->aux_file;
        header["toffset"] = nifti->toffset;
        header["cal_range"] = {nifti->cal_min, nifti->cal_max};
        header["dim_info"] = nifti->dim_info;
        header["slice"] = {{"code", nifti->slice_code}, {"start", nifti->slice_start}, {"end", nifti->slice_end},
                           {"duration", nifti->slice_duration}};
        info["nifti"] = header;
    }

    if (command.json) {
        std::cout << info.dump() << "\n";
        return;
    }
    std::cout << "file:      " << command.file.string() << "\n";
    std::cout << "kind:      " << info["kind"].get<std::string>() << " (" << info["format"].get<std::string>() << ")\n";
    const auto size = info["size"].get<std::vector<std::int64_t>>();
    std::cout << "size:      ";
    for (std::size_t i = 0; i < size.size(); ++i) std::cout << (i ? " x " : "") << size[i];
    std::cout << (size.size() == 3 ? "  (W x H x D)" : size.size() == 2 ? "  (W x H)" : "") << "\n";
    if (info["batch"].get<std::int64_t>() != 1) std::cout << "batch:     " << info["batch"].get<std::int64_t>() << "\n";
    std::cout << "channels:  " << info["channels"].get<std::int64_t>();
    if (info.contains("channel_order")) std::cout << " (" << info["channel_order"].get<std::string>() << ")";
    if (info.contains("time")) std::cout << " (the volumes of the time axis)";
    std::cout << "\n";
    if (info.contains("time")) {
        const std::string unit = info["time"]["tr_unit"].get<std::string>();
        std::cout << "time:      " << info["time"]["volumes"].get<std::int64_t>() << " volumes, TR " << info["time"]["tr"].get<double>()
                  << (unit.empty() ? " (no time unit in the header)" : " " + unit) << "\n";
    }
    if (info.contains("pages")) {
        const bool first_only = info["batch"].get<std::int64_t>() == 1;
        std::cout << "pages:     " << info["pages"].get<std::int64_t>() << (first_only ? " (the first is read)" : "") << "\n";
    }
    if (info.contains("exif_orientation")) {
        static const char* const kShown[] = {"", "as stored", "mirrored left-right", "turned 180 degrees", "mirrored top-bottom",
                                             "transposed", "turned 90 degrees clockwise", "transverse", "turned 90 degrees counter-clockwise"};
        const int tag = info["exif_orientation"].get<int>();
        std::cout << "orientation: EXIF " << tag << " (" << kShown[tag] << ")"
                  << (info["exif_orientation_applied"].get<bool>() ? ", applied: the size and pixels are as shown"
                      : tag > 1 && info["format"].get<std::string>().rfind("tif", 0) == 0 ? ", applied by the TIFF decoder to 8-bit images"
                      : tag > 1 ? ", not applied (--keep-orientation)"
                                : "")
                  << "\n";
    }
    std::cout << "dtype:     " << info["dtype"].get<std::string>() << "\n";
    if (info.contains("range")) std::cout << "range:     [" << joined(info["range"].get<std::vector<double>>(), ", ") << "]\n";
    if (range.non_finite > 0) std::cout << "non-finite values: " << range.non_finite << "\n";
    if (info.contains("stored_dtype")) {
        std::cout << "stored as: " << info["stored_dtype"].get<std::string>() << ", value = stored * "
                  << info["scl_slope"].get<double>() << " + " << info["scl_inter"].get<double>() << "\n";
    }
    if (geometry) {
        std::cout << "spacing:   " << joined(geometry->spacing, " x ") << " mm\n";
        std::cout << "origin:    (" << joined(geometry->origin, ", ") << ") mm, LPS\n";
        const std::size_t d = geometry->dimension();
        for (std::size_t i = 0; i < d; ++i) {
            std::cout << (i == 0 ? "direction: " : "           ") << "["
                      << joined(std::vector<double>(geometry->direction.begin() + static_cast<std::ptrdiff_t>(i * d),
                                                    geometry->direction.begin() + static_cast<std::ptrdiff_t>((i + 1) * d)),
                                ", ")
                      << "]\n";
        }
    }
    if (nifti) {
        std::cout << "nifti:     NIfTI-" << nifti->version << (nifti->big_endian ? " big-endian" : "") << ", qform_code "
                  << nifti->qform_code << ", sform_code " << nifti->sform_code << ", xyzt_units " << nifti->xyzt_units;
        if (nifti->intent_code != 0) std::cout << ", intent " << nifti->intent_code;
        if (!nifti->intent_name.empty()) std::cout << " '" << nifti->intent_name << "'";
        std::cout << "\n";
        if (!nifti->descrip.empty()) std::cout << "descrip:   " << nifti->descrip << "\n";
    }
}

}  // namespace

CommandBinding register_info_command(CLI::App& app) {
    auto command = std::make_shared<InfoCommand>();
    CLI::App* sub = app.add_subcommand("info", "Describe an image, volume, tensor, flow or transform file");
    sub->add_option("file", command->file, "The file to describe")->required();
    sub->add_flag("--json", command->json, "Print one JSON object instead of text");
    sub->add_option("-i,--moving", command->moving, "For a transform (FILE[,tags]): the moving image, where its format needs it");
    sub->add_option("-r,--reference", command->reference, "For a transform: the reference image, where its format needs it");
    add_volume_options(*sub, command->volume, false);
    add_common_options(*sub, command->common);
    sub->footer(
        "Examples:\n"
        "  gridwarp info data/brain.nii.gz\n"
        "  gridwarp info data/tilt.tfm\n"
        "  gridwarp info dicom_folder/                # the series it holds\n"
        "  gridwarp info bold2t1.mat,fsl -i bold.nii.gz -r t1.nii.gz   # the matrix in RAS\n"
        "  gridwarp info photo.png --json | python3 -m json.tool");
    return set_command_action(*sub, command, run_info);
}

}  // namespace gridwarp::cli
