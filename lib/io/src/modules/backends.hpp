// Internal: the readers and writers that need OpenCV or ITK live in modules of their own
// (gridwarp_opencv.so, gridwarp_itk.so), loaded with dlopen the first time a file needs them. A
// command on .npy or NIfTI files never loads either library, so it starts in a few milliseconds
// instead of resolving the ~160 shared libraries they pull in (docs/design.md).
//
// A module exports one C function, gridwarp_<name>_backend_vN(), returning a table of function
// pointers; N goes up when the table changes, so that a module from another build is refused by
// name rather than called through the wrong table. To add a reader: put its code in a module (or a
// new one), add its functions to the table, and call them through the accessor below.
//
// No exception crosses the table: the program links its own copy of the C++ runtime (start-up,
// docs/performance.md) while a module uses the shared one, and a C++ exception thrown by one copy
// and caught by the other corrupts both copies' exception bookkeeping. Each function catches what
// it throws and returns it as a ModuleFailure; the program throws it again (throw_if_failed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"
#include "gridwarp/physical.hpp"

namespace gridwarp::io::detail {

struct ModuleFailure {
    enum class Kind { None, File, InvalidArgument, OutOfMemory, Other };
    Kind kind = Kind::None;
    std::string message;         // what() (a FileError's problem, without its file)
    std::filesystem::path file;  // a FileError's file
};

struct RasterBackend {  // OpenCV
    ModuleFailure (*read)(const std::filesystem::path& file, Image& image);
    ModuleFailure (*write)(const StagedFile& staged, const Image& image,
                           const WriteOptions& options);
    ModuleFailure (*has_writer)(const std::filesystem::path& file, bool& has);
};

struct ItkBackend {  // ITK: NRRD, MetaImage, transform files; compressed DICOM pixel data through GDCM
    ModuleFailure (*read_volume)(const std::filesystem::path& file, bool with_pixels, Image& image);
    ModuleFailure (*write_volume)(const StagedFile& staged, const Image& image);
    ModuleFailure (*read_transform)(const std::filesystem::path& file, std::size_t dimension, TransformFile& transform);
    // A DICOM file's pixel data in `transfer_syntax`, decoded into `bytes` bytes at `destination`.
    ModuleFailure (*decode_dicom_pixels)(const std::filesystem::path& file, const std::string& transfer_syntax, std::uint64_t bytes,
                                         char* destination);
};

// In a module: runs `call`, returning what it threw as a failure (none when it returned).
template <class Call>
ModuleFailure failure_of(Call&& call) noexcept {
    using Kind = ModuleFailure::Kind;
    try {
        call();
        return {};
    } catch (const FileError& error) {
        const std::string whole = error.what(), prefix = error.file().string() + ": ";
        return {Kind::File, whole.starts_with(prefix) ? whole.substr(prefix.size()) : whole, error.file()};
    } catch (const std::invalid_argument& error) {
        return {Kind::InvalidArgument, error.what(), {}};
    } catch (const std::bad_alloc&) {
        return {Kind::OutOfMemory, {}, {}};
    } catch (const std::exception& error) {
        return {Kind::Other, error.what(), {}};
    } catch (...) {
        return {Kind::Other, "an unknown error in a gridwarp module", {}};
    }
}

// In the program: throws what the module's function threw (FileError, std::invalid_argument,
// std::bad_alloc, otherwise std::runtime_error with its message).
void throw_if_failed(const ModuleFailure& failure);

// Load the module on first use (thread-safe); throw std::runtime_error naming the module and where
// it was looked for when it cannot be loaded.
const RasterBackend& raster_backend();
// Where a module file (or the HDF5 reader program, which lives beside the modules) is: the first
// of the folders above that holds it; std::runtime_error naming the folders otherwise.
std::filesystem::path find_module_file(const std::string& file_name);
const ItkBackend& itk_backend();

}  // namespace gridwarp::io::detail

// The entry points the modules define.
extern "C" const gridwarp::io::detail::RasterBackend* gridwarp_opencv_backend_v3();
extern "C" const gridwarp::io::detail::ItkBackend* gridwarp_itk_backend_v6();
