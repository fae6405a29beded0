// Per-volume transform lists (`-t LIST,per-volume`) through read_transform_series: a file of N
// ITK transforms, AFNI 3dvolreg rows, or a folder of FSL matrices (MCFLIRT's MAT_0000, ...) whose
// members the input lays out, symbolic links and subfolders included, so that the folder rules
// (members regular files inside the folder, checked before any is read) are fuzzed too.
//
// Input: one selector byte (% 3: ITK text list, AFNI .1D rows, folder), then the bytes. For the
// folder, the bytes are split at "\n--\n" into up to 8 members; a member starting "@" is a
// symbolic link to the rest of its first line, one starting "/" a subfolder.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace fs = std::filesystem;

namespace {

gridwarp::io::Image volume() {
    gridwarp::io::Image image;
    image.kind = gridwarp::io::FileKind::Volume;
    image.spatial = {12, 14, 10};
    image.geometry = gridwarp::io::Geometry{{1.2, 0.9, 2.5}, {-30.0, 12.0, 4.0}, {0.98, -0.17, 0.0, 0.17, 0.98, 0.05, 0.0, -0.05, 1.0}};
    return image;
}

// The folder form: a fresh folder of members each input.
fs::path lay_out_folder(const fs::path& folder, std::string_view bytes) {
    std::error_code error;
    fs::remove_all(folder, error);
    fs::create_directories(folder);
    std::size_t start = 0;
    for (int index = 0; index < 8 && start <= bytes.size(); ++index) {
        const std::size_t end = std::min(bytes.find("\n--\n", start), bytes.size());
        const std::string_view member = bytes.substr(start, end - start);
        char name[16];
        std::snprintf(name, sizeof name, "MAT_%04d", index);
        const fs::path path = folder / name;
        if (!member.empty() && member.front() == '@') {
            const std::string target(member.substr(1, member.find('\n') == std::string_view::npos ? std::string_view::npos : member.find('\n') - 1));
            fs::create_symlink(target, path, error);
        } else if (!member.empty() && member.front() == '/') {
            fs::create_directory(path, error);
        } else {
            gridwarp::fuzz::write_file(path, member);
        }
        start = end + 4;
    }
    return folder;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using gridwarp::fuzz::ScratchFile;
    using gridwarp::io::TransformFormat;
    static const ScratchFile files[2] = {ScratchFile(".txt"), ScratchFile(".1D")};
    static const ScratchFile folder("-per-volume");
    static const gridwarp::io::Image moving = volume();
    if (size < 1) return 0;
    const std::string_view bytes = gridwarp::fuzz::as_text(data + 1, size - 1);
    gridwarp::io::TransformSpec spec;
    spec.per_volume = true;
    spec.inverse = (data[0] & 0x80) != 0;
    switch (data[0] % 3) {
        case 0: spec.file = files[0].write(bytes); break;
        case 1: spec.file = files[1].write(bytes); spec.format = TransformFormat::Afni; break;
        default: spec.file = lay_out_folder(folder.path(), bytes); spec.format = TransformFormat::Fsl; break;
    }
    gridwarp::io::TransformContext context;
    context.dimension = 3;
    context.moving = &moving;
    context.reference = &moving;
    try {
        (void)gridwarp::io::read_transform_series(spec, context);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
