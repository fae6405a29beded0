// Sizes and transforms as the command line spells them.
#include "geometry_options.hpp"

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

}  // namespace gridwarp::cli
