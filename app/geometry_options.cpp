// Sizes and transforms as the command line spells them.
#include "geometry_options.hpp"

#include "gridwarp/io/error.hpp"

#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>

namespace gridwarp::cli {

std::vector<std::int64_t> parse_integer_list(const std::string& option, const std::string& text, std::size_t count) {
    std::vector<std::int64_t> values;
    std::string item;
    std::istringstream in(text);
    const char separator = text.find(',') != std::string::npos ? ',' : 'x';
    while (std::getline(in, item, separator)) {
        std::size_t used = 0;
        long long value = 0;
        try {
            value = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size()) {
            throw std::invalid_argument(option + ": expected whole numbers separated by ',' (or 'x'), got '" + text + "'");
        }
        values.push_back(value);
    }
    if (values.size() != count) {
        throw std::invalid_argument(option + ": expected " + std::to_string(count) + " numbers, got '" + text + "'");
    }
    return values;
}

TransformArgument parse_transform_argument(std::string text) {
    return io::parse_transform_spec(std::move(text));
}

std::vector<PointTransform> read_transform_chain(const std::vector<std::string>& arguments, std::size_t dimension,
                                                 const io::Image* moving, const io::Image* reference,
                                                 const io::ReadOptions& options, std::vector<std::shared_ptr<const Tensor>>& buffers) {
    std::vector<PointTransform> steps;
    for (std::size_t k = 0; k < arguments.size(); ++k) {
        const TransformArgument argument = parse_transform_argument(arguments[k]);
        if (argument.per_volume) throw io::FileError(argument.file, "a per-volume transform list maps a 4-D series: give it to resample");
        io::TransformContext context;
        context.dimension = dimension;
        context.moving = moving;
        context.reference = reference;
        context.acts_first = k == 0;
        context.acts_last = k + 1 == arguments.size();
        io::TransformFile file = io::read_transform(argument, context, options);
        for (const auto& warning : file.warnings) spdlog::warn("{}", warning);
        for (const auto& note : file.notes) spdlog::info("{}", note);
        steps.insert(steps.end(), file.steps.rbegin(), file.steps.rend());
        buffers.insert(buffers.end(), file.buffers.begin(), file.buffers.end());
    }
    return steps;
}

InversionReport map_point_coordinates(const std::vector<PointTransform>& steps, std::vector<double>& coordinates, std::size_t dimension,
                                      bool ras, bool from_moving, double tolerance, int threads) {
    // ITK's physical space is LPS; RAS differs in the signs of x and y.
    auto flip = [&] {
        if (!ras) return;
        for (std::size_t at = 0; at < coordinates.size(); at += dimension) {
            coordinates[at] = -coordinates[at];
            coordinates[at + 1] = -coordinates[at + 1];
        }
    };
    flip();
    InversionReport report;
    if (from_moving) {
        report = map_points_inverse(steps, coordinates, tolerance, threads);
    } else {
        map_points(steps, coordinates, threads);
    }
    flip();
    return report;
}

}  // namespace gridwarp::cli
