#include "image_arguments.hpp"

namespace gridwarp::cli {

std::shared_ptr<const io::Image> load_image(const ImageArgument& argument, const io::ReadOptions& options) {
    if (argument.in_memory()) return argument.image;
    return std::make_shared<const io::Image>(io::read_image(argument.path, options));
}

std::shared_ptr<const io::Image> load_image_header(const ImageArgument& argument, const io::ReadOptions& options) {
    if (argument.in_memory()) return argument.image;
    return std::make_shared<const io::Image>(io::read_image_header(argument.path, options));
}

io::FlowField load_flow(const ImageArgument& argument, const io::ReadOptions& options) {
    if (argument.in_memory()) return io::flow_from_image(*argument.image, argument.path);
    return io::read_flow(argument.path, options);
}

std::vector<std::filesystem::path> files_of(std::initializer_list<const ImageArgument*> arguments) {
    std::vector<std::filesystem::path> files;
    for (const ImageArgument* argument : arguments) {
        if (!argument->in_memory() && !argument->path.empty()) files.push_back(argument->path);
    }
    return files;
}

}  // namespace gridwarp::cli
