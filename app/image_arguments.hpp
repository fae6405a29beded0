// The image a command reads and the result it makes: a file each on the command line, or, for
// the Python package, an image held in memory (gridwarp.Image) and a result kept in memory.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gridwarp/io/flow_io.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

// An input file, or an image in memory in its place. CLI11 assigns the option's text (a path).
struct ImageArgument {
    std::filesystem::path path;              // the file; for an image in memory, the name messages give it
    std::shared_ptr<const io::Image> image;  // set: read nothing, sample this

    ImageArgument& operator=(const std::string& text) {
        path = text;
        image.reset();
        return *this;
    }
    bool empty() const { return path.empty() && !image; }
    bool in_memory() const { return image != nullptr; }
    std::string string() const { return path.string(); }
};

// The input's pixels: read from its file with `options`, or the image in memory (shared, not copied).
std::shared_ptr<const io::Image> load_image(const ImageArgument& argument, const io::ReadOptions& options);
// Only the header (geometry, shape, type) is needed: io::read_image_header, or the image in memory.
std::shared_ptr<const io::Image> load_image_header(const ImageArgument& argument, const io::ReadOptions& options);
// A flow field: io::read_flow, or the field the image in memory holds (io::flow_from_image).
io::FlowField load_flow(const ImageArgument& argument, const io::ReadOptions& options);
// Paths of the files among `arguments`, for check_outputs_differ.
std::vector<std::filesystem::path> files_of(std::initializer_list<const ImageArgument*> arguments);

// The output file, or, where `result` is set before the run, the image the result is kept in
// (nothing written).
struct OutputArgument {
    std::filesystem::path path;         // the file; for a result in memory, the name messages give it
    std::shared_ptr<io::Image> result;  // set: the result goes here

    OutputArgument& operator=(const std::string& text) {
        path = text;
        result.reset();
        return *this;
    }
    bool in_memory() const { return result != nullptr; }
    std::string string() const { return path.string(); }
};

}  // namespace gridwarp::cli
