// Transform files of the registration packages (FreeSurfer LTA, AFNI .aff12.1D, FSL FLIRT,
// NiftyReg, plain RAS and LPS matrices, elastix TransformParameters), read with a moving and a
// reference image as resample gives them: an oblique, anisotropic moving volume and an
// axis-aligned reference.
//
// Input: one selector byte (low seven bits % 7: lta, afni, fsl, niftyreg, ras, lps, elastix; bit 7:
// ,inverse), then the file's bytes.
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace {

gridwarp::io::Image volume(std::vector<double> direction, std::vector<double> spacing, std::vector<double> origin) {
    gridwarp::io::Image image;
    image.kind = gridwarp::io::FileKind::Volume;
    image.spatial = {12, 14, 10};
    image.geometry = gridwarp::io::Geometry{std::move(spacing), std::move(origin), std::move(direction)};
    return image;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    gridwarp::fuzz::prepare_process();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using gridwarp::io::TransformFormat;
    using gridwarp::fuzz::ScratchFile;
    static const TransformFormat formats[7] = {TransformFormat::Lta, TransformFormat::Afni, TransformFormat::Fsl,    TransformFormat::NiftyReg,
                                               TransformFormat::Ras, TransformFormat::Lps,  TransformFormat::Elastix};
    static const ScratchFile files[7] = {ScratchFile(".lta"),     ScratchFile(".aff12.1D"), ScratchFile(".mat"),          ScratchFile(".niftyreg.txt"),
                                         ScratchFile(".ras.txt"), ScratchFile(".lps.txt"),  ScratchFile(".elastix.txt")};
    static const gridwarp::io::Image moving =
        volume({0.98, -0.17, 0.0, 0.17, 0.98, 0.05, 0.0, -0.05, 1.0}, {1.2, 0.9, 2.5}, {-30.0, 12.0, 4.0});
    static const gridwarp::io::Image reference = volume({-1, 0, 0, 0, 1, 0, 0, 0, 1}, {2.0, 2.0, 2.0}, {10.0, -20.0, 5.0});
    if (size < 1) return 0;
    const std::size_t which = (data[0] & 0x7f) % 7;
    gridwarp::io::TransformSpec spec;
    spec.file = files[which].write(gridwarp::fuzz::as_text(data + 1, size - 1));
    spec.format = formats[which];
    spec.inverse = (data[0] & 0x80) != 0;
    gridwarp::io::TransformContext context;
    context.dimension = 3;
    context.moving = &moving;
    context.reference = &reference;
    try {
        (void)gridwarp::io::read_transform(spec, context);
    } catch (const gridwarp::io::FileError&) {
    }
    return 0;
}
