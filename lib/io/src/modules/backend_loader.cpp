#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "modules/backends.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// Where modules are looked for, in order: $GRIDWARP_MODULE_DIR, the running program's own folder,
// ../lib/gridwarp beside it (an installed tree), the folder of the shared object this code is in
// (the Python package's), and the build tree's module folder.
std::vector<fs::path> module_directories() {
    std::vector<fs::path> directories;
    if (const char* environment = std::getenv("GRIDWARP_MODULE_DIR"); environment && *environment) directories.emplace_back(environment);
    std::error_code error;
    const fs::path program = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
        directories.push_back(program.parent_path());
        directories.push_back(program.parent_path().parent_path() / "lib" / "gridwarp");
    }
    Dl_info self;
    if (::dladdr(reinterpret_cast<const void*>(&module_directories), &self) != 0 && self.dli_fname != nullptr) {
        const fs::path object = fs::absolute(self.dli_fname, error);
        if (!error) directories.push_back(object.parent_path());
    }
#ifdef GRIDWARP_MODULE_BUILD_DIR
    directories.emplace_back(GRIDWARP_MODULE_BUILD_DIR);
#endif
    return directories;
}

template <class Table>
const Table& load(const char* module, const char* entry_point) {
    const fs::path file = find_module_file(std::string(module) + ".so");
    // Never unloaded: objects it made (pixel buffers, exceptions) may outlive any caller.
    void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) throw std::runtime_error(std::string("cannot load ") + file.string() + ": " + ::dlerror());
    using Entry = const Table* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, entry_point));
    if (!entry) throw std::runtime_error(file.string() + " has no " + entry_point + " (a module from another gridwarp build?)");
    return *entry();
}

}  // namespace

fs::path find_module_file(const std::string& file_name) {
    std::string tried;
    for (const auto& directory : module_directories()) {
        const fs::path file = directory / file_name;
        std::error_code error;
        if (fs::exists(file, error)) return file;
        tried += (tried.empty() ? "" : ", ") + directory.string();
    }
    throw std::runtime_error("gridwarp's module " + file_name + " is needed for this file but was not found (looked in " + tried +
                             "; set GRIDWARP_MODULE_DIR)");
}

void throw_if_failed(const ModuleFailure& failure) {
    using Kind = ModuleFailure::Kind;
    switch (failure.kind) {
        case Kind::None: return;
        case Kind::File: throw FileError(failure.file, failure.message);
        case Kind::InvalidArgument: throw std::invalid_argument(failure.message);
        case Kind::OutOfMemory: throw std::bad_alloc();
        case Kind::Other: throw std::runtime_error(failure.message);
    }
    throw std::runtime_error(failure.message);
}

const RasterBackend& raster_backend() {
    static const RasterBackend& table = load<RasterBackend>("gridwarp_opencv", "gridwarp_opencv_backend_v3");
    return table;
}

const ItkBackend& itk_backend() {
    static const ItkBackend& table = load<ItkBackend>("gridwarp_itk", "gridwarp_itk_backend_v6");
    return table;
}

}  // namespace gridwarp::io::detail
