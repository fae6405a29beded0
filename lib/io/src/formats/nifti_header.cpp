// NIfTI-1/-2 headers: parsing with checks, writing, and the voxel-to-world geometry rules.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/raster_pixels.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/nifti.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

NiftiGeometryRule parse_nifti_geometry_rule(const std::string& name) {
    if (name == "standard") return NiftiGeometryRule::Standard;
    if (name == "itk") return NiftiGeometryRule::Itk;
    throw std::invalid_argument("--nifti-geometry: expected 'standard' or 'itk', got '" + name + "'");
}

namespace {

// NIfTI datatype codes with the bytes of one voxel; 0 for those gridwarp has no dtype for.
struct DatatypeInfo {
    int code;
    int bitpix;
    std::size_t bytes;  // 0: not supported
    const char* name;
};
constexpr DatatypeInfo kDatatypes[] = {
    {1, 1, 0, "BINARY"},        {2, 8, 1, "UINT8"},      {4, 16, 2, "INT16"},      {8, 32, 4, "INT32"},
    {16, 32, 4, "FLOAT32"},     {32, 64, 8, "COMPLEX64"}, {64, 64, 8, "FLOAT64"},   {128, 24, 3, "RGB24"},
    {256, 8, 1, "INT8"},        {512, 16, 2, "UINT16"},  {768, 32, 4, "UINT32"},   {1024, 64, 8, "INT64"},
    {1280, 64, 8, "UINT64"},    {1536, 128, 0, "FLOAT128"}, {1792, 128, 16, "COMPLEX128"},
    {2048, 256, 0, "COMPLEX256"}, {2304, 32, 4, "RGBA32"},
};

const DatatypeInfo* find_datatype(int code) {
    for (const auto& info : kDatatypes) {
        if (info.code == code) return &info;
    }
    return nullptr;
}

// Reads little- or big-endian fields of a header.
class FieldReader {
public:
    FieldReader(std::span<const std::uint8_t> bytes, bool swap) : bytes_(bytes), swap_(swap) {}
    template <class T>
    T get(std::size_t offset) const {
        std::uint8_t raw[sizeof(T)];
        std::memcpy(raw, bytes_.data() + offset, sizeof(T));
        if (swap_) std::reverse(raw, raw + sizeof(T));
        T value;
        std::memcpy(&value, raw, sizeof(T));
        return value;
    }
    std::string text(std::size_t offset, std::size_t size) const {
        const char* begin = reinterpret_cast<const char*>(bytes_.data() + offset);
        return std::string(begin, strnlen(begin, size));
    }

private:
    std::span<const std::uint8_t> bytes_;
    bool swap_;
};

template <class T>
void put(std::uint8_t* bytes, std::size_t offset, T value) {
    std::memcpy(bytes + offset, &value, sizeof(T));  // little-endian hosts only (x86-64, AArch64)
}

void put_text(std::uint8_t* bytes, std::size_t offset, std::size_t size, const std::string& text) {
    std::memcpy(bytes + offset, text.data(), std::min(text.size(), size - 1));
}

std::int32_t raw_int32(std::span<const std::uint8_t> bytes, bool swap) { return FieldReader(bytes, swap).get<std::int32_t>(0); }

}  // namespace

std::size_t NiftiHeader::bytes_per_voxel() const {
    const DatatypeInfo* info = find_datatype(datatype);
    return info ? info->bytes : 0;
}

NiftiHeader parse_nifti_header(std::span<const std::uint8_t> bytes, const fs::path& file) {
    if (bytes.size() < 348) {
        throw FileError(file, "truncated NIfTI header: " + std::to_string(bytes.size()) + " bytes, expected at least 348");
    }
    NiftiHeader header;
    const std::int32_t size_native = raw_int32(bytes, false), size_swapped = raw_int32(bytes, true);
    if (size_native == 348 || size_native == 540) {
        header.big_endian = std::endian::native == std::endian::big;
    } else if (size_swapped == 348 || size_swapped == 540) {
        header.big_endian = std::endian::native == std::endian::little;
    } else {
        throw FileError(file, "not a NIfTI file: sizeof_hdr is " + std::to_string(size_native) + ", expected 348 (NIfTI-1) or 540 (NIfTI-2)");
    }
    const bool swap = header.big_endian != (std::endian::native == std::endian::big);
    const FieldReader f(bytes, swap);
    const std::int32_t header_size = f.get<std::int32_t>(0);
    if (header_size == 540) {
        if (bytes.size() < 540) throw FileError(file, "truncated NIfTI-2 header: " + std::to_string(bytes.size()) + " bytes, expected 540");
        const std::string magic = f.text(4, 4);
        static constexpr std::uint8_t kTail[4] = {'\r', '\n', 0x1a, '\n'};
        if ((magic != "n+2" && magic != "ni2") || std::memcmp(bytes.data() + 8, kTail, 4) != 0) {
            throw FileError(file, "bad NIfTI-2 magic, expected 'n+2' or 'ni2' followed by \\r\\n\\032\\n");
        }
        header.version = 2;
        header.single_file = magic == "n+2";
        header.datatype = f.get<std::int16_t>(12);
        header.bitpix = f.get<std::int16_t>(14);
        for (int i = 0; i < 8; ++i) header.dim[i] = f.get<std::int64_t>(16 + 8 * i);
        header.intent_p1 = f.get<double>(80);
        header.intent_p2 = f.get<double>(88);
        header.intent_p3 = f.get<double>(96);
        for (int i = 0; i < 8; ++i) header.pixdim[i] = f.get<double>(104 + 8 * i);
        header.vox_offset = f.get<std::int64_t>(168);
        header.scl_slope = f.get<double>(176);
        header.scl_inter = f.get<double>(184);
        header.cal_max = f.get<double>(192);
        header.cal_min = f.get<double>(200);
        header.slice_duration = f.get<double>(208);
        header.toffset = f.get<double>(216);
        header.slice_start = f.get<std::int64_t>(224);
        header.slice_end = f.get<std::int64_t>(232);
        header.descrip = f.text(240, 80);
        header.aux_file = f.text(320, 24);
        header.qform_code = f.get<std::int32_t>(344);
        header.sform_code = f.get<std::int32_t>(348);
        header.quatern_b = f.get<double>(352);
        header.quatern_c = f.get<double>(360);
        header.quatern_d = f.get<double>(368);
        header.qoffset_x = f.get<double>(376);
        header.qoffset_y = f.get<double>(384);
        header.qoffset_z = f.get<double>(392);
        for (int i = 0; i < 12; ++i) header.srow[i] = f.get<double>(400 + 8 * i);
        header.slice_code = f.get<std::int32_t>(496);
        header.xyzt_units = f.get<std::int32_t>(500);
        header.intent_code = f.get<std::int32_t>(504);
        header.intent_name = f.text(508, 16);
        header.dim_info = bytes[524];
    } else {
        const std::string magic = f.text(344, 4);
        if (magic != "n+1" && magic != "ni1") {
            throw FileError(file, "bad NIfTI-1 magic, expected 'n+1' or 'ni1' (an Analyze 7.5 header is not read)");
        }
        header.version = 1;
        header.single_file = magic == "n+1";
        header.dim_info = bytes[39];
        for (int i = 0; i < 8; ++i) header.dim[i] = f.get<std::int16_t>(40 + 2 * i);
        header.intent_p1 = f.get<float>(56);
        header.intent_p2 = f.get<float>(60);
        header.intent_p3 = f.get<float>(64);
        header.intent_code = f.get<std::int16_t>(68);
        header.datatype = f.get<std::int16_t>(70);
        header.bitpix = f.get<std::int16_t>(72);
        header.slice_start = f.get<std::int16_t>(74);
        for (int i = 0; i < 8; ++i) header.pixdim[i] = f.get<float>(76 + 4 * i);
        const float vox_offset = f.get<float>(108);
        if (!std::isfinite(vox_offset) || vox_offset < 0 || vox_offset > 1e15f || vox_offset != std::floor(vox_offset)) {
            throw FileError(file, "vox_offset is " + std::to_string(vox_offset) + ", expected a non-negative whole number of bytes");
        }
        header.vox_offset = static_cast<std::int64_t>(vox_offset);
        header.scl_slope = f.get<float>(112);
        header.scl_inter = f.get<float>(116);
        header.slice_end = f.get<std::int16_t>(120);
        header.slice_code = bytes[122];
        header.xyzt_units = bytes[123];
        header.cal_max = f.get<float>(124);
        header.cal_min = f.get<float>(128);
        header.slice_duration = f.get<float>(132);
        header.toffset = f.get<float>(136);
        header.descrip = f.text(148, 80);
        header.aux_file = f.text(228, 24);
        header.qform_code = f.get<std::int16_t>(252);
        header.sform_code = f.get<std::int16_t>(254);
        header.quatern_b = f.get<float>(256);
        header.quatern_c = f.get<float>(260);
        header.quatern_d = f.get<float>(264);
        header.qoffset_x = f.get<float>(268);
        header.qoffset_y = f.get<float>(272);
        header.qoffset_z = f.get<float>(276);
        for (int i = 0; i < 12; ++i) header.srow[i] = f.get<float>(280 + 4 * i);
        header.intent_name = f.text(328, 16);
    }

    const DatatypeInfo* type = find_datatype(header.datatype);
    if (!type) throw FileError(file, "unknown NIfTI datatype " + std::to_string(header.datatype));
    if (type->bytes == 0) throw FileError(file, std::string("NIfTI datatype ") + type->name + " is not supported");
    if (header.bitpix != type->bitpix) {
        throw FileError(file, "bitpix is " + std::to_string(header.bitpix) + " but datatype " + type->name + " has " +
                                  std::to_string(type->bitpix) + " bits");
    }
    const std::int64_t rank = header.dim[0];
    if (rank < 1 || rank > 7) throw FileError(file, "dim[0] is " + std::to_string(rank) + ", expected 1 to 7");
    std::uint64_t voxels = 1;
    for (std::int64_t i = 1; i <= rank; ++i) {
        if (header.dim[i] < 1) {
            throw FileError(file, "dim[" + std::to_string(i) + "] is " + std::to_string(header.dim[i]) + ", expected a positive size");
        }
        if (voxels > (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(header.dim[i])) {
            throw FileError(file, "the header's sizes overflow: more than 2^62 voxels");
        }
        voxels *= static_cast<std::uint64_t>(header.dim[i]);
    }
    if (voxels > (std::uint64_t{1} << 62) / type->bytes) throw FileError(file, "the header's sizes overflow: more than 2^62 bytes");
    const std::int64_t minimum_offset = header.single_file ? header_size : 0;
    if (header.vox_offset < minimum_offset && header.single_file) {
        throw FileError(file, "vox_offset is " + std::to_string(header.vox_offset) + ", inside the " + std::to_string(header_size) +
                                  "-byte header");
    }
    if (std::isinf(header.scl_slope) || std::isinf(header.scl_inter)) {
        throw FileError(file, "scl_slope/scl_inter are not finite (" + std::to_string(header.scl_slope) + ", " +
                                  std::to_string(header.scl_inter) + ")");
    }
    for (std::int64_t i = 1; i <= std::min<std::int64_t>(rank, 3); ++i) {
        if (!std::isfinite(header.pixdim[i])) throw FileError(file, "pixdim[" + std::to_string(i) + "] is not finite");
    }
    return header;
}

std::array<std::uint8_t, 544> serialize_nifti_header(const NiftiHeader& h, std::size_t& size) {
    std::array<std::uint8_t, 544> b{};
    std::uint8_t* p = b.data();
    if (h.version == 2) {
        size = 544;
        put<std::int32_t>(p, 0, 540);
        std::memcpy(p + 4, h.single_file ? "n+2\0\r\n\032\n" : "ni2\0\r\n\032\n", 8);
        put<std::int16_t>(p, 12, static_cast<std::int16_t>(h.datatype));
        put<std::int16_t>(p, 14, static_cast<std::int16_t>(h.bitpix));
        for (int i = 0; i < 8; ++i) put<std::int64_t>(p, 16 + 8 * i, h.dim[i]);
        put<double>(p, 80, h.intent_p1);
        put<double>(p, 88, h.intent_p2);
        put<double>(p, 96, h.intent_p3);
        for (int i = 0; i < 8; ++i) put<double>(p, 104 + 8 * i, h.pixdim[i]);
        put<std::int64_t>(p, 168, h.vox_offset);
        put<double>(p, 176, h.scl_slope);
        put<double>(p, 184, h.scl_inter);
        put<double>(p, 192, h.cal_max);
        put<double>(p, 200, h.cal_min);
        put<double>(p, 208, h.slice_duration);
        put<double>(p, 216, h.toffset);
        put<std::int64_t>(p, 224, h.slice_start);
        put<std::int64_t>(p, 232, h.slice_end);
        put_text(p, 240, 80, h.descrip);
        put_text(p, 320, 24, h.aux_file);
        put<std::int32_t>(p, 344, h.qform_code);
        put<std::int32_t>(p, 348, h.sform_code);
        put<double>(p, 352, h.quatern_b);
        put<double>(p, 360, h.quatern_c);
        put<double>(p, 368, h.quatern_d);
        put<double>(p, 376, h.qoffset_x);
        put<double>(p, 384, h.qoffset_y);
        put<double>(p, 392, h.qoffset_z);
        for (int i = 0; i < 12; ++i) put<double>(p, 400 + 8 * i, h.srow[i]);
        put<std::int32_t>(p, 496, h.slice_code);
        put<std::int32_t>(p, 500, h.xyzt_units);
        put<std::int32_t>(p, 504, h.intent_code);
        put_text(p, 508, 16, h.intent_name);
        p[524] = h.dim_info;
        return b;
    }
    size = 352;
    put<std::int32_t>(p, 0, 348);
    p[38] = 'r';  // "regular", as nifti_io writes it
    p[39] = h.dim_info;
    for (int i = 0; i < 8; ++i) put<std::int16_t>(p, 40 + 2 * i, static_cast<std::int16_t>(h.dim[i]));
    put<float>(p, 56, static_cast<float>(h.intent_p1));
    put<float>(p, 60, static_cast<float>(h.intent_p2));
    put<float>(p, 64, static_cast<float>(h.intent_p3));
    put<std::int16_t>(p, 68, static_cast<std::int16_t>(h.intent_code));
    put<std::int16_t>(p, 70, static_cast<std::int16_t>(h.datatype));
    put<std::int16_t>(p, 72, static_cast<std::int16_t>(h.bitpix));
    put<std::int16_t>(p, 74, static_cast<std::int16_t>(h.slice_start));
    for (int i = 0; i < 8; ++i) put<float>(p, 76 + 4 * i, static_cast<float>(h.pixdim[i]));
    put<float>(p, 108, static_cast<float>(h.vox_offset));
    put<float>(p, 112, static_cast<float>(h.scl_slope));
    put<float>(p, 116, static_cast<float>(h.scl_inter));
    put<std::int16_t>(p, 120, static_cast<std::int16_t>(h.slice_end));
    p[122] = static_cast<std::uint8_t>(h.slice_code);
    p[123] = static_cast<std::uint8_t>(h.xyzt_units);
    put<float>(p, 124, static_cast<float>(h.cal_max));
    put<float>(p, 128, static_cast<float>(h.cal_min));
    put<float>(p, 132, static_cast<float>(h.slice_duration));
    put<float>(p, 136, static_cast<float>(h.toffset));
    put_text(p, 148, 80, h.descrip);
    put_text(p, 228, 24, h.aux_file);
    put<std::int16_t>(p, 252, static_cast<std::int16_t>(h.qform_code));
    put<std::int16_t>(p, 254, static_cast<std::int16_t>(h.sform_code));
    put<float>(p, 256, static_cast<float>(h.quatern_b));
    put<float>(p, 260, static_cast<float>(h.quatern_c));
    put<float>(p, 264, static_cast<float>(h.quatern_d));
    put<float>(p, 268, static_cast<float>(h.qoffset_x));
    put<float>(p, 272, static_cast<float>(h.qoffset_y));
    put<float>(p, 276, static_cast<float>(h.qoffset_z));
    for (int i = 0; i < 12; ++i) put<float>(p, 280 + 4 * i, static_cast<float>(h.srow[i]));
    put_text(p, 328, 16, h.intent_name);
    std::memcpy(p + 344, h.single_file ? "n+1" : "ni1", 4);
    return b;
}

namespace {

using Matrix34 = std::array<double, 12>;  // row-major 3x4: [linear | offset]

// Millimetres per unit of the header's spatial unit (NIfTI: 1 metre, 2 mm, 3 micron; 0 unknown).
double millimetres_per_unit(const NiftiHeader& header) {
    switch (header.xyzt_units & 0x07) {
        case 1: return 1000.0;
        case 3: return 0.001;
        default: return 1.0;
    }
}

double voxel_size(double pixdim) { return pixdim > 0 ? pixdim : 1.0; }  // nifti_io's quatern_to_mat44

Matrix34 qform_matrix(const NiftiHeader& h) {
    double b = h.quatern_b, c = h.quatern_c, d = h.quatern_d;
    double a = 1.0 - (b * b + c * c + d * d);
    if (a < 1e-7) {  // nifti_io: a 180-degree turn; renormalise (b, c, d)
        a = 1.0 / std::sqrt(b * b + c * c + d * d);
        b *= a;
        c *= a;
        d *= a;
        a = 0.0;
    } else {
        a = std::sqrt(a);
    }
    const double qfac = h.pixdim[0] < 0 ? -1.0 : 1.0;
    const double x = voxel_size(h.pixdim[1]), y = voxel_size(h.pixdim[2]), z = voxel_size(h.pixdim[3]) * qfac;
    return {(a * a + b * b - c * c - d * d) * x, 2 * (b * c - a * d) * y, 2 * (b * d + a * c) * z, h.qoffset_x,
            2 * (b * c + a * d) * x, (a * a + c * c - b * b - d * d) * y, 2 * (c * d - a * b) * z, h.qoffset_y,
            2 * (b * d - a * c) * x, 2 * (c * d + a * b) * y, (a * a + d * d - c * c - b * b) * z, h.qoffset_z};
}

Matrix34 sform_matrix(const NiftiHeader& h) { return h.srow; }

double determinant3(const Matrix34& m) {
    return m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) + m[2] * (m[4] * m[9] - m[5] * m[8]);
}

double column_norm(const Matrix34& m, int j) { return std::sqrt(m[j] * m[j] + m[4 + j] * m[4 + j] + m[8 + j] * m[8 + j]); }

// ITK 5.2's choice between sform and qform (NiftiImageIO::SetImageIOOrientationFromNIfTI), with
// the same tolerances. Returns nullptr when ITK refuses the file.
const char* itk_choice(const NiftiHeader& h, const Matrix34& s, const Matrix34& q) {
    // nifti_io leaves sto_xyz zero when sform_code is 0 and puts method 1 in qto_xyz when qform_code is 0.
    bool similar = true;
    for (int i = 0; i < 3 && similar; ++i) {
        for (int j = 0; j < 3; ++j) similar = similar && std::abs(s[4 * i + j] - q[4 * i + j]) <= 1e-5;
    }
    if (similar && std::abs(s[3] - q[3]) + std::abs(s[7] - q[7]) + std::abs(s[11] - q[11]) > 1e-7) similar = false;
    bool prefer_sform = similar;
    if (!prefer_sform || h.sform_code != 0) {
        bool decomposable = std::abs(determinant3(s)) > 1e-5;
        const double sizes[3] = {h.pixdim[1], h.pixdim[2], h.pixdim[3]};
        std::array<double, 9> rotation{};
        for (int j = 0; j < 3 && decomposable; ++j) {
            const double norm = column_norm(s, j);
            decomposable = std::abs(sizes[j] - norm) <= 1e-3 && norm > 0;
            for (int i = 0; i < 3 && decomposable; ++i) rotation[3 * i + j] = s[4 * i + j] / norm;
        }
        for (int i = 0; i < 3 && decomposable; ++i) {
            for (int k = 0; k < 3; ++k) {
                double dot = 0;
                for (int j = 0; j < 3; ++j) dot += rotation[3 * i + j] * rotation[3 * k + j];
                decomposable = decomposable && std::abs(dot - (i == k ? 1.0 : 0.0)) <= 1e-4;
            }
        }
        if (decomposable) {
            if (h.qform_code == 0 && h.sform_code != 0) {
                prefer_sform = true;
            } else if (h.sform_code == 1) {
                prefer_sform = true;
            } else if (h.qform_code != 0 && h.sform_code != 0) {
                // ITK multiplies the 4x4 sform by the transposed 4x4 qform and asks for the identity.
                double S[4][4] = {{s[0], s[1], s[2], s[3]}, {s[4], s[5], s[6], s[7]}, {s[8], s[9], s[10], s[11]}, {0, 0, 0, 1}};
                double Q[4][4] = {{q[0], q[1], q[2], q[3]}, {q[4], q[5], q[6], q[7]}, {q[8], q[9], q[10], q[11]}, {0, 0, 0, 1}};
                bool identity = true;
                for (int i = 0; i < 4; ++i) {
                    for (int k = 0; k < 4; ++k) {
                        double v = 0;
                        for (int j = 0; j < 4; ++j) v += S[i][j] * Q[k][j];
                        identity = identity && std::abs(v - (i == k ? 1.0 : 0.0)) <= 1e-4;
                    }
                }
                prefer_sform = identity;
            }
        }
    }
    if (prefer_sform) return "sform";
    if (h.qform_code != 0) return "qform";
    return nullptr;
}

}  // namespace

double nifti_repetition_time(const NiftiHeader& header) {
    if (header.dim[0] < 4 || header.dim[4] < 2 || !(header.pixdim[4] > 0.0) || !std::isfinite(header.pixdim[4])) return 0.0;
    switch (header.xyzt_units & 0x38) {
        case 8: return header.pixdim[4];
        case 16: return header.pixdim[4] / 1000.0;
        case 24: return header.pixdim[4] / 1e6;
        default: return 0.0;
    }
}

Geometry nifti_geometry(const NiftiHeader& header, std::size_t dimension, NiftiGeometryRule rule, const fs::path& file,
                        bool* used_method_1) {
    if (used_method_1) *used_method_1 = false;
    const double unit = millimetres_per_unit(header);
    Matrix34 ras{};
    Geometry geometry = Geometry::identity(dimension);
    if (rule == NiftiGeometryRule::Itk) {
        for (std::size_t i = 0; i < dimension; ++i) geometry.spacing[i] = header.pixdim[i + 1] * unit;
        if (header.sform_code == 0 && header.qform_code == 0) {
            if (used_method_1) *used_method_1 = true;
            return geometry;  // ITK: origin 0, identity direction (LPS)
        }
        const Matrix34 sform = header.sform_code > 0 ? sform_matrix(header) : Matrix34{};
        Matrix34 qform = header.qform_code > 0 ? qform_matrix(header) : Matrix34{};
        if (header.qform_code <= 0) qform = {voxel_size(header.pixdim[1]), 0, 0, 0, 0, voxel_size(header.pixdim[2]), 0, 0, 0, 0,
                                             voxel_size(header.pixdim[3]), 0};
        const char* choice = itk_choice(header, sform, qform);
        if (!choice) throw FileError(file, "ITK's rule finds no orthonormal transform (ITK: 'ITK only supports orthonormal direction cosines')");
        ras = std::string(choice) == "sform" ? sform : qform;
        for (double v : ras) {
            if (!std::isfinite(v)) throw FileError(file, std::string("the ") + choice + " is not finite");
        }
        for (std::size_t i = 0; i < dimension; ++i) {
            const double sign = i < 2 ? -1.0 : 1.0;
            geometry.origin[i] = sign * ras[4 * i + 3];  // not scaled by the unit, as ITK 5.2 does
            double norm = 0;
            for (std::size_t k = 0; k < dimension; ++k) norm += ras[4 * k + i] * ras[4 * k + i];
            norm = std::sqrt(norm);
            for (std::size_t k = 0; k < dimension; ++k) {
                geometry.direction[k * dimension + i] = (k < 2 ? -1.0 : 1.0) * ras[4 * k + i] / (norm > 0 ? norm : 1.0);
            }
        }
        return geometry;
    }
    if (header.sform_code > 0) {
        ras = sform_matrix(header);
    } else if (header.qform_code > 0) {
        ras = qform_matrix(header);
    } else {
        ras = {header.pixdim[1], 0, 0, 0, 0, header.pixdim[2], 0, 0, 0, 0, header.pixdim[3], 0};
        if (used_method_1) *used_method_1 = true;
    }
    for (double& v : ras) v *= unit;
    const char* source = header.sform_code > 0 ? "sform" : header.qform_code > 0 ? "qform" : "pixdim";
    for (double v : ras) {
        if (!std::isfinite(v)) throw FileError(file, std::string("the ") + source + " is not finite");
        // No imaging geometry spans 10,000 km; such values are garbage, and far past the range in
        // which positions computed from them stay meaningful.
        if (std::abs(v) > detail::kMaxGeometryMagnitude) {
            throw FileError(file, std::string("the ") + source + " holds " + std::to_string(v) + ", expected magnitudes below 1e10");
        }
    }
    // RAS -> LPS: the first two world axes change sign.
    for (std::size_t j = 0; j < dimension; ++j) {
        double norm = 0;
        for (std::size_t i = 0; i < dimension; ++i) norm += ras[4 * i + j] * ras[4 * i + j];
        norm = std::sqrt(norm);
        if (!(norm > 0)) throw FileError(file, std::string("the ") + source + " is singular: axis " + std::to_string(j) + " has no length");
        geometry.spacing[j] = norm;
        for (std::size_t i = 0; i < dimension; ++i) geometry.direction[i * dimension + j] = (i < 2 ? -1.0 : 1.0) * ras[4 * i + j] / norm;
    }
    for (std::size_t i = 0; i < dimension; ++i) geometry.origin[i] = (i < 2 ? -1.0 : 1.0) * ras[4 * i + 3];
    for (double& v : geometry.direction) v += 0.0;  // no -0 from the sign flips
    for (double& v : geometry.origin) v += 0.0;
    // A singular direction (two axes along one line) cannot be inverted for resampling.
    if (dimension == 3) {
        Matrix34 m{};
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) m[4 * i + j] = geometry.direction[3 * i + j];
        }
        if (std::abs(determinant3(m)) < 1e-6) throw FileError(file, std::string("the ") + source + " is singular");
    }
    return geometry;
}

void set_nifti_geometry(NiftiHeader& header, const Geometry& geometry) {
    const std::size_t dimension = geometry.dimension();
    const double unit = millimetres_per_unit(header);
    // The 3x4 RAS affine in the header's unit; a 2-D geometry keeps the third axis as the header had it.
    Matrix34 ras{};
    ras[10] = voxel_size(header.pixdim[3]);
    for (std::size_t i = 0; i < std::min<std::size_t>(dimension, 3); ++i) {
        const double sign = i < 2 ? -1.0 : 1.0;
        for (std::size_t j = 0; j < dimension; ++j) {
            ras[4 * i + j] = sign * geometry.direction[i * dimension + j] * geometry.spacing[j] / unit;
        }
        ras[4 * i + 3] = sign * geometry.origin[i] / unit;
    }
    for (std::size_t j = 0; j < std::min<std::size_t>(dimension, 3); ++j) header.pixdim[j + 1] = geometry.spacing[j] / unit;
    for (int i = 0; i < 12; ++i) header.srow[i] = ras[i];
    if (header.sform_code <= 0 && header.qform_code <= 0) {
        // Neither transform was set: keep it so when the geometry is what method 1 describes
        // (pixdims alone), else record it as scanner-anatomical, as ITK does.
        bool method_1 = true;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 4; ++j) method_1 = method_1 && (j == i ? ras[4 * i + j] == voxel_size(header.pixdim[i + 1]) : ras[4 * i + j] == 0);
        }
        if (method_1) return;
        header.sform_code = 1;
        header.qform_code = 1;
    }
    set_nifti_qform(header, ras);
}

std::array<double, 12> nifti_qform_matrix(const NiftiHeader& header) { return qform_matrix(header); }

void set_nifti_qform(NiftiHeader& header, const std::array<double, 12>& ras) {
    // The qform holds rotations only: unit, orthogonal columns (within float precision).
    std::array<double, 9> r{};
    bool orthonormal = true;
    for (int j = 0; j < 3; ++j) {
        const double norm = column_norm(ras, j);
        for (int i = 0; i < 3; ++i) r[3 * i + j] = norm > 0 ? ras[4 * i + j] / norm : 0;
        header.pixdim[j + 1] = norm;
    }
    for (int i = 0; i < 3; ++i) {
        for (int k = i; k < 3; ++k) {
            double dot = 0;
            for (int j = 0; j < 3; ++j) dot += r[3 * j + i] * r[3 * j + k];
            orthonormal = orthonormal && std::abs(dot - (i == k ? 1.0 : 0.0)) <= 1e-6;
        }
    }
    if (!orthonormal) {
        if (header.sform_code <= 0) header.sform_code = header.qform_code;
        header.qform_code = 0;
        header.quatern_b = header.quatern_c = header.quatern_d = 0;
        header.qoffset_x = ras[3];
        header.qoffset_y = ras[7];
        header.qoffset_z = ras[11];
        return;
    }
    const double det = r[0] * (r[4] * r[8] - r[5] * r[7]) - r[1] * (r[3] * r[8] - r[5] * r[6]) + r[2] * (r[3] * r[7] - r[4] * r[6]);
    const double qfac = det < 0 ? -1.0 : 1.0;
    if (qfac < 0) {
        for (int i = 0; i < 3; ++i) r[3 * i + 2] = -r[3 * i + 2];
    }
    header.pixdim[0] = qfac;
    // nifti_mat44_to_quatern's branches, on the rotation r (1-based names r11..r33).
    const double r11 = r[0], r12 = r[1], r13 = r[2], r21 = r[3], r22 = r[4], r23 = r[5], r31 = r[6], r32 = r[7], r33 = r[8];
    double a = r11 + r22 + r33 + 1.0, b, c, d;
    if (a > 0.5) {
        a = 0.5 * std::sqrt(a);
        b = 0.25 * (r32 - r23) / a;
        c = 0.25 * (r13 - r31) / a;
        d = 0.25 * (r21 - r12) / a;
    } else {
        const double xd = 1.0 + r11 - (r22 + r33), yd = 1.0 + r22 - (r11 + r33), zd = 1.0 + r33 - (r11 + r22);
        if (xd > 1.0) {
            b = 0.5 * std::sqrt(xd);
            c = 0.25 * (r12 + r21) / b;
            d = 0.25 * (r13 + r31) / b;
            a = 0.25 * (r32 - r23) / b;
        } else if (yd > 1.0) {
            c = 0.5 * std::sqrt(yd);
            b = 0.25 * (r12 + r21) / c;
            d = 0.25 * (r23 + r32) / c;
            a = 0.25 * (r13 - r31) / c;
        } else {
            d = 0.5 * std::sqrt(zd);
            b = 0.25 * (r13 + r31) / d;
            c = 0.25 * (r23 + r32) / d;
            a = 0.25 * (r21 - r12) / d;
        }
        if (a < 0.0) {
            b = -b;
            c = -c;
            d = -d;
        }
    }
    header.quatern_b = b;
    header.quatern_c = c;
    header.quatern_d = d;
    header.qoffset_x = ras[3];
    header.qoffset_y = ras[7];
    header.qoffset_z = ras[11];
}

}  // namespace gridwarp::io
