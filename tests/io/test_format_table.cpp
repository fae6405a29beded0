// The format table (lib/io/src/formats/format_table.hpp): which row a file name selects, as
// docs/formats.md lists the formats.
#include <catch2/catch.hpp>

#include <string>

#include "formats/format_table.hpp"  // lib/io/src: internal
#include "gridwarp/io/image.hpp"

using namespace gridwarp;
namespace io = gridwarp::io;

TEST_CASE("format table: a name selects the row of its longest suffix; other names go to OpenCV", "[io][formats]") {
    const struct {
        const char* name;
        const char* format;
        io::FileKind kind;
    } cases[] = {
        {"x.npy", "NumPy", io::FileKind::Tensor},          {"X.NPY", "NumPy", io::FileKind::Tensor},
        {"t1.nii", "NIfTI", io::FileKind::Volume},         {"t1.nii.gz", "NIfTI", io::FileKind::Volume},
        {"t1.hdr", "NIfTI", io::FileKind::Volume},         {"t1.img.gz", "NIfTI", io::FileKind::Volume},
        {"ct.nrrd", "NRRD", io::FileKind::Volume},         {"ct.nhdr", "NRRD", io::FileKind::Volume},
        {"ct.mha", "MetaImage", io::FileKind::Volume},     {"ct.mhd", "MetaImage", io::FileKind::Volume},
        {"aseg.mgz", "MGH", io::FileKind::Volume},         {"T1.MGH", "MGH", io::FileKind::Volume},
        {"orig.mgh.gz", "MGH", io::FileKind::Volume},
        {"a.png", "PNG", io::FileKind::Raster},            {"a.nii.gz.png", "PNG", io::FileKind::Raster},
        {"a.jpg", "JPEG", io::FileKind::Raster},           {"a.JPEG", "JPEG", io::FileKind::Raster},
        {"stack.tif", "TIFF", io::FileKind::Raster},       {"stack.TIFF", "TIFF", io::FileKind::Raster},
        {"a.bmp", "BMP", io::FileKind::Raster},            {"a.dib", "BMP", io::FileKind::Raster},
        {"a.webp", "WebP", io::FileKind::Raster},          {"a.pgm", "image", io::FileKind::Raster},
        {"a.jpe", "image", io::FileKind::Raster},          {"no_extension", "image", io::FileKind::Raster},
        {"dir.nii/a.png", "PNG", io::FileKind::Raster},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        CHECK(io::detail::format_for_path(c.name).name == c.format);
        CHECK(io::kind_for_path(c.name) == c.kind);
    }
    // Every suffix of every row selects that row, and exactly one row has none.
    int rows_without_suffix = 0;
    for (const auto& row : io::detail::format_table()) {
        bool has_suffix = false;
        for (std::string_view suffix : row.suffixes) {
            if (suffix.empty()) continue;
            has_suffix = true;
            INFO(row.name << " " << suffix);
            CHECK(&io::detail::format_for_path("file" + std::string(suffix)) == &row);
        }
        rows_without_suffix += has_suffix ? 0 : 1;
        CHECK(row.read != nullptr);
        CHECK(row.write != nullptr);
    }
    CHECK(rows_without_suffix == 1);
}
