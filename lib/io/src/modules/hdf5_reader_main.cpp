// gridwarp-hdf5-reader FILE DIMENSION MAX_BYTES: reads an ITK HDF5 transform file and writes what
// it holds to stdout (transform_wire.hpp), or the one-line reason it refuses the file to stderr
// (exit status kHdf5ReaderRefused). gridwarp runs it for every .h5 transform (hdf5_isolation.hpp),
// so that libhdf5 never parses a file inside gridwarp's own process.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "gridwarp/io/error.hpp"
#include "modules/module_functions.hpp"
#include "transforms/hdf5_isolation.hpp"
#include "transforms/transform_wire.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define GRIDWARP_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRIDWARP_ADDRESS_SANITIZER 1
#endif
#endif

namespace {

int refuse(const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    return gridwarp::io::detail::kHdf5ReaderRefused;
}

// Past these the kernel ends the process (SIGXCPU, SIGALRM, or a failed allocation), which the
// caller reports as a hostile file.
void limit_resources(std::uint64_t budget) {
    const rlimit cpu{gridwarp::io::detail::kHdf5ReaderSeconds, gridwarp::io::detail::kHdf5ReaderSeconds + 1};
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::alarm(gridwarp::io::detail::kHdf5ReaderSeconds);
    // AddressSanitizer maps terabytes of shadow memory at start: a data limit stops it (the
    // sanitizer job's build, docs/reliability.md), where the budget check still applies.
#ifndef GRIDWARP_ADDRESS_SANITIZER
    if (budget != 0) {
        const rlim_t data = budget + gridwarp::io::detail::kHdf5ReaderLibraryBytes;
        const rlimit memory{data, data};
        ::setrlimit(RLIMIT_DATA, &memory);
    }
#endif
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) return refuse("usage: gridwarp-hdf5-reader FILE DIMENSION MAX_BYTES");
    const std::filesystem::path file = argv[1];
    const std::size_t dimension = std::strtoull(argv[2], nullptr, 10);
    gridwarp::io::MemoryBudget budget;
    budget.max_bytes = std::strtoull(argv[3], nullptr, 10);
    if (dimension != 2 && dimension != 3) return refuse("only 2-D and 3-D transforms are read");
    limit_resources(budget.max_bytes);
    try {
        const std::string bytes =
            gridwarp::io::detail::encode_transform_file(gridwarp::io::detail::read_itk_hdf5_transform(file, dimension, budget));
        for (std::size_t at = 0; at < bytes.size();) {
            const ssize_t wrote = ::write(1, bytes.data() + at, bytes.size() - at);
            if (wrote <= 0) return 1;
            at += static_cast<std::size_t>(wrote);
        }
        return 0;
    } catch (const gridwarp::io::FileError& e) {
        // The caller names the file again.
        std::string message = e.what();
        const std::string prefix = file.string() + ": ";
        if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
        return refuse(message);
    } catch (const std::bad_alloc&) {
        return refuse("reading it needs more memory than the budget allows (--max-memory)");
    } catch (const std::exception& e) {
        return refuse(std::string("cannot read the transform: ") + e.what());
    }
}
