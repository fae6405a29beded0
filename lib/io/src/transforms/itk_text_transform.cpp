// ITK transform files read without ITK: the text format ("#Insight Transform File V1.0", .tfm/.txt)
// and ITK's Matlab v4 format (.mat). Every transform a file declares is checked here first (a kind
// gridwarp can use, for the images' dimension, with exactly its kind's parameter counts), so that
// ITK's own reader, which allocates whatever a file declares (a B-spline grid, a name length) and
// ignores surplus parameters, only ever sees files that passed. The linear kinds registration tools
// write most are then computed here, following ITK 5.2's SetParameters/ComputeMatrix of each kind,
// so that such a resample never loads the ITK module (backends.hpp); the other linear kinds are
// left to ITK (transform_io.cpp).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/error.hpp"
#include "gridwarp/io/transform_io.hpp"

namespace gridwarp::io {

namespace fs = std::filesystem;

namespace {

// More transforms than this are no registration's output (a per-volume head-motion list holds one
// per volume: a few thousand for the longest fMRI runs); ITK would build an object per step.
constexpr std::size_t kMaxTransforms = 65536;
// A displacement field's values (float64): 2 GiB, the default memory budget.
constexpr std::size_t kMaxFieldValues = std::size_t{1} << 28;

struct DeclaredTransform {
    std::string type;  // as written: "AffineTransform_double_3_3"
    std::string kind;  // "AffineTransform"
    std::size_t input_dimension = 0, output_dimension = 0;
    std::vector<double> parameters, fixed;
    bool has_parameters = false, has_fixed = false;
    std::size_t line = 0;  // where it is declared (text), or its index (Matlab)
};

// "AffineTransform_double_3_3" -> kind, dimensions.
bool parse_type(const std::string& name, DeclaredTransform& transform) {
    const auto last = name.rfind('_');
    if (last == std::string::npos || last == 0) return false;
    const auto middle = name.rfind('_', last - 1);
    if (middle == std::string::npos || middle == 0) return false;
    const auto precision = name.rfind('_', middle - 1);
    if (precision == std::string::npos || precision == 0) return false;
    const std::string type = name.substr(precision + 1, middle - precision - 1);
    if (type != "double" && type != "float") return false;
    auto dimension = [](const std::string& digits, std::size_t& out) {
        if (digits.empty() || digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
        out = std::stoul(digits);
        return true;
    };
    transform.type = name;
    transform.kind = name.substr(0, precision);
    return dimension(name.substr(middle + 1, last - middle - 1), transform.input_dimension) &&
           dimension(name.substr(last + 1), transform.output_dimension);
}

// How many parameters a linear kind takes for `d`-D images; 0 for a kind gridwarp cannot use.
// The counts are ITK 5.2's ParametersDimension of each class.
std::size_t expected_parameter_count(const std::string& kind, std::size_t d) {
    if (kind == "AffineTransform" || kind == "MatrixOffsetTransformBase" || kind == "ScalableAffineTransform") {
        return d * (d + 1);
    }
    if (kind == "CenteredAffineTransform" || kind == "FixedCenterOfRotationAffineTransform") return d * (d + 2);
    if (kind == "TranslationTransform" || kind == "ScaleTransform" || kind == "ScaleLogarithmicTransform") return d;
    if (d == 2) {
        if (kind == "Euler2DTransform" || kind == "Rigid2DTransform") return 3;
        if (kind == "Similarity2DTransform") return 4;
        if (kind == "CenteredRigid2DTransform") return 5;
        if (kind == "CenteredSimilarity2DTransform") return 6;
    }
    if (d == 3) {
        if (kind == "VersorTransform") return 3;
        if (kind == "Euler3DTransform" || kind == "VersorRigid3DTransform") return 6;
        if (kind == "Similarity3DTransform" || kind == "QuaternionRigidTransform") return 7;
        if (kind == "CenteredEuler3DTransform" || kind == "ScaleVersor3DTransform") return 9;
        if (kind == "Rigid3DTransform" || kind == "ComposeScaleSkewVersor3DTransform") return 12;
        if (kind == "ScaleSkewVersor3DTransform") return 15;
    }
    return 0;
}

class FileProblem {
public:
    explicit FileProblem(const fs::path& source) : source_(source) {}
    [[noreturn]] void operator()(const std::string& problem) const {
        throw FileError(source_, "not a transform gridwarp can use: " + problem);
    }

private:
    const fs::path& source_;
};

template <class Unsigned>
Unsigned swap_bytes(Unsigned value) {  // std::byteswap is C++23
    Unsigned swapped = 0;
    for (std::size_t i = 0; i < sizeof value; ++i, value >>= 8) swapped = static_cast<Unsigned>((swapped << 8) | (value & 0xff));
    return swapped;
}

std::string trimmed(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return "";
    const auto last = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(first, last - first + 1));
}

bool parse_numbers(const std::string& text, std::vector<double>& values) {
    std::istringstream in(text);
    std::string token;
    while (in >> token) {
        char* end = nullptr;
        const double value = std::strtod(token.c_str(), &end);
        if (end == token.c_str() || *end != '\0' || !std::isfinite(value)) return false;
        values.push_back(value);
    }
    return true;
}

// The text format as ITK's TxtTransformIO reads it: "Name: value" lines, each trimmed; blank lines
// and '#' comments skipped. ComponentTransformFile (a line naming another file to read) is refused:
// the file named would be read with no check.
std::vector<DeclaredTransform> parse_text(std::string_view text, const FileProblem& fail) {
    std::vector<DeclaredTransform> transforms;
    std::size_t number = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        const std::string line = trimmed(text.substr(0, end));
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        ++number;
        if (line.empty() || line[0] == '#') continue;
        const std::string where = "line " + std::to_string(number) + ": ";
        const auto colon = line.find(':');
        if (colon == std::string::npos) fail(where + "expected 'Name: value', found '" + line.substr(0, 80) + "'");
        const std::string key = trimmed(std::string_view(line).substr(0, colon));
        const std::string value = trimmed(std::string_view(line).substr(colon + 1));
        if (key == "Transform") {
            if (transforms.size() == kMaxTransforms) fail("more than " + std::to_string(kMaxTransforms) + " transforms");
            DeclaredTransform transform;
            transform.line = number;
            if (!parse_type(value, transform)) {
                fail(where + "expected a transform type such as AffineTransform_double_3_3, found '" + value.substr(0, 80) + "'");
            }
            transforms.push_back(std::move(transform));
        } else if (key == "Parameters" || key == "FixedParameters") {
            if (transforms.empty()) fail(where + key + " before any Transform line");
            DeclaredTransform& transform = transforms.back();
            bool& seen = key == "Parameters" ? transform.has_parameters : transform.has_fixed;
            if (seen) fail(where + "a second " + key + " line for the transform of line " + std::to_string(transform.line));
            seen = true;
            if (!parse_numbers(value, key == "Parameters" ? transform.parameters : transform.fixed)) {
                fail(where + key + " must be finite numbers separated by spaces");
            }
        } else if (key == "ComponentTransformFile") {
            fail(where + "transforms in other files (ComponentTransformFile) are not read; list them in this file");
        } else {
            fail(where + "unknown field '" + key.substr(0, 80) + "' (expected Transform, Parameters or FixedParameters)");
        }
    }
    return transforms;
}

// ITK's Matlab v4 transform files (vnl_matlab_write): per transform, a column vector named by the
// transform's type holding its parameters, then one named "fixed". Each matrix is a 20-byte header
// (type, rows, columns, imaginary flag, name length: int32 in the file's byte order), the name with
// its NUL, then the values (float64, or float32 where the type's tens digit is 1).
std::vector<DeclaredTransform> parse_matlab(std::string_view bytes, const FileProblem& fail) {
    struct Matrix {
        std::string name;
        std::vector<double> values;
    };
    std::size_t position = 0;
    auto next_matrix = [&](std::size_t index) {
        const std::string where = "matrix " + std::to_string(index + 1) + " at byte " + std::to_string(position) + ": ";
        if (bytes.size() - position < 20) fail(where + "the file ends inside its 20-byte header");
        std::int32_t header[5];
        std::memcpy(header, bytes.data() + position, sizeof header);
        // As vnl_matlab_readhdr decides: these type codes read as they are mean the file is in this
        // machine's byte order, anything else that it is in the other (1010, single precision from a
        // big-endian writer, is only ever seen swapped on a little-endian reader).
        auto native_type = [](std::int32_t type) {
            return type == 0 || type == 10 || type == 100 || type == 110 || type == 1000 || type == 1100 || type == 1110;
        };
        const bool swapped = !native_type(header[0]);
        if (swapped) {
            for (auto& field : header) field = static_cast<std::int32_t>(swap_bytes(static_cast<std::uint32_t>(field)));
        }
        const auto [type, rows, columns, imaginary, name_length] = header;
        if (!native_type(type) && !(swapped && type == 1010)) {
            fail(where + "not a Matlab v4 matrix header (type code " + std::to_string(type) + ")");
        }
        if (columns != 1 || rows < 0) {
            fail(where + "expected a column vector, found " + std::to_string(rows) + " x " + std::to_string(columns));
        }
        if (imaginary != 0) fail(where + "complex values");
        position += 20;
        if (name_length < 2 || name_length > 256 || static_cast<std::size_t>(name_length) > bytes.size() - position) {
            fail(where + "implausible name length " + std::to_string(name_length));
        }
        Matrix matrix;
        const std::string_view name = bytes.substr(position, static_cast<std::size_t>(name_length));
        if (name.back() != '\0' || name.find('\0') != name.size() - 1) fail(where + "its name is not one NUL-terminated string");
        matrix.name.assign(name.data(), name.size() - 1);
        position += static_cast<std::size_t>(name_length);
        const bool single = type % 100 >= 10;
        const std::size_t item = single ? 4 : 8;
        if (static_cast<std::size_t>(rows) > (bytes.size() - position) / item) {
            fail(where + std::to_string(rows) + " values declared, the file holds " + std::to_string((bytes.size() - position) / item));
        }
        for (std::int32_t r = 0; r < rows; ++r, position += item) {
            double value;
            if (single) {
                std::uint32_t bits;
                std::memcpy(&bits, bytes.data() + position, 4);
                if (swapped) bits = swap_bytes(bits);
                value = static_cast<double>(std::bit_cast<float>(bits));
            } else {
                std::uint64_t bits;
                std::memcpy(&bits, bytes.data() + position, 8);
                if (swapped) bits = swap_bytes(bits);
                value = std::bit_cast<double>(bits);
            }
            if (!std::isfinite(value)) fail(where + "'" + matrix.name + "' holds a non-finite value");
            matrix.values.push_back(value);
        }
        return matrix;
    };
    std::vector<DeclaredTransform> transforms;
    for (std::size_t index = 0; position < bytes.size(); index += 2) {
        if (transforms.size() == kMaxTransforms) fail("more than " + std::to_string(kMaxTransforms) + " transforms");
        Matrix parameters = next_matrix(index);
        DeclaredTransform transform;
        transform.line = index + 1;
        if (!parse_type(parameters.name, transform)) {
            fail("matrix " + std::to_string(index + 1) + ": expected a transform type such as AffineTransform_double_3_3 as its name, found '" +
                 parameters.name + "'");
        }
        if (position == bytes.size()) fail("the transform " + parameters.name + " has no 'fixed' matrix after it");
        Matrix fixed = next_matrix(index + 1);
        if (fixed.name != "fixed") fail("matrix " + std::to_string(index + 2) + ": expected 'fixed', found '" + fixed.name + "'");
        transform.parameters = std::move(parameters.values);
        transform.fixed = std::move(fixed.values);
        transform.has_parameters = transform.has_fixed = true;
        transforms.push_back(std::move(transform));
    }
    return transforms;
}

using Matrix = std::vector<double>;  // d x d, row-major

Matrix multiply(const Matrix& a, const Matrix& b, std::size_t d) {
    Matrix c(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < d; ++j) {
            for (std::size_t k = 0; k < d; ++k) c[i * d + j] += a[i * d + k] * b[k * d + j];
        }
    }
    return c;
}

Matrix versor_matrix(double x, double y, double z) {
    // VersorRigid3DTransform::SetParameters: an axis of norm >= 1 is pulled just inside the ball.
    double norm = x * x + y * y + z * z;
    if (norm > 0) norm = std::sqrt(norm);
    constexpr double epsilon = 1e-10;
    if (norm >= 1.0 - epsilon) {
        const double scale = norm + epsilon * norm;
        x /= scale, y /= scale, z /= scale;
    }
    const double w = std::sqrt(1.0 - (x * x + y * y + z * z));
    const double xx = x * x, yy = y * y, zz = z * z, xy = x * y, xz = x * z, xw = x * w, yz = y * z, yw = y * w, zw = z * w;
    return {1.0 - 2.0 * (yy + zz), 2.0 * (xy - zw),       2.0 * (xz + yw),
            2.0 * (xy + zw),       1.0 - 2.0 * (xx + zz), 2.0 * (yz - xw),
            2.0 * (xz - yw),       2.0 * (yz + xw),       1.0 - 2.0 * (xx + yy)};
}

// The matrix and translation of one checked transform, or false when its kind is left to ITK.
bool linear_parts(const DeclaredTransform& t, std::size_t d, Matrix& matrix, std::vector<double>& translation) {
    const auto& p = t.parameters;
    matrix.assign(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i) matrix[i * d + i] = 1.0;
    translation.assign(d, 0.0);
    if (t.kind == "AffineTransform" || t.kind == "MatrixOffsetTransformBase") {
        std::copy(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(d * d), matrix.begin());
        std::copy(p.begin() + static_cast<std::ptrdiff_t>(d * d), p.end(), translation.begin());
    } else if (t.kind == "TranslationTransform") {
        translation = p;
    } else if (t.kind == "Euler3DTransform") {
        const double cx = std::cos(p[0]), sx = std::sin(p[0]), cy = std::cos(p[1]), sy = std::sin(p[1]), cz = std::cos(p[2]),
                     sz = std::sin(p[2]);
        const Matrix rx{1, 0, 0, 0, cx, -sx, 0, sx, cx}, ry{cy, 0, sy, 0, 1, 0, -sy, 0, cy}, rz{cz, -sz, 0, sz, cz, 0, 0, 0, 1};
        const bool zyx = t.fixed.size() == 4 && t.fixed[3] != 0.0;  // ITK's ComputeZYX, serialised as a 4th fixed value
        matrix = zyx ? multiply(multiply(rz, ry, 3), rx, 3) : multiply(multiply(rz, rx, 3), ry, 3);
        translation = {p[3], p[4], p[5]};
    } else if (t.kind == "VersorRigid3DTransform") {
        matrix = versor_matrix(p[0], p[1], p[2]);
        translation = {p[3], p[4], p[5]};
    } else if (t.kind == "Similarity3DTransform") {
        matrix = versor_matrix(p[0], p[1], p[2]);
        for (double& v : matrix) v *= p[6];
        translation = {p[3], p[4], p[5]};
    } else if (t.kind == "Euler2DTransform" || t.kind == "Rigid2DTransform") {
        const double c = std::cos(p[0]), s = std::sin(p[0]);
        matrix = {c, -s, s, c};
        translation = {p[1], p[2]};
    } else if (t.kind == "Similarity2DTransform") {
        const double c = std::cos(p[1]) * p[0], s = std::sin(p[1]) * p[0];
        matrix = {c, -s, s, c};
        translation = {p[2], p[3]};
    } else {
        return false;
    }
    return true;
}

}  // namespace

void check_itk_transform_declarations(const std::vector<ItkTransformDeclaration>& transforms, std::size_t dimension,
                                      const fs::path& source) {
    const FileProblem fail(source);
    if (transforms.empty()) fail("the file declares no transform");
    if (transforms.size() > kMaxTransforms) fail("more than " + std::to_string(kMaxTransforms) + " transforms");
    for (std::size_t k = 0; k < transforms.size(); ++k) {
        const ItkTransformDeclaration& t = transforms[k];
        const std::string what = t.where + ": " + t.type;
        DeclaredTransform parsed;
        if (!parse_type(t.type, parsed)) fail(t.where + ": expected a transform type such as AffineTransform_double_3_3, found '" + t.type.substr(0, 80) + "'");
        if (parsed.input_dimension != dimension || parsed.output_dimension != dimension) {
            fail(what + " cannot map " + std::to_string(dimension) + "-D images");
        }
        if (parsed.kind == "CompositeTransform") {
            if (k != 0) fail(what + ": a composite may only come first");
            if (t.has_parameters || t.has_fixed_parameters) fail(what + ": a composite takes no parameters (its transforms follow it)");
            if (transforms.size() == 1) fail(what + ": the composite holds no transform");
            continue;
        }
        if (parsed.kind == "DisplacementFieldTransform" || parsed.kind == "BSplineTransform") {
            // Fixed parameters: the grid's size, origin, spacing and direction; parameters: its vectors
            // (a B-spline's coefficients).
            if (!t.has_parameters || !t.has_fixed_parameters) fail(what + ": expected both Parameters and FixedParameters");
            if (t.fixed_parameters != dimension * (dimension + 3)) {
                fail(what + ": expected " + std::to_string(dimension * (dimension + 3)) + " fixed parameters, found " +
                     std::to_string(t.fixed_parameters));
            }
            if (t.parameters == 0 || t.parameters % dimension != 0 || t.parameters > kMaxFieldValues) {
                fail(what + ": " + std::to_string(t.parameters) + " parameters is not a field of " + std::to_string(dimension) +
                     "-vectors of at most " + std::to_string(kMaxFieldValues / dimension) + " voxels");
            }
            // ITK allocates the field from the declared size before it reads a parameter: the size
            // must be whole, positive and hold exactly the parameters given.
            if (t.fixed_values.size() != t.fixed_parameters) fail(what + ": its fixed parameters cannot be read");
            double voxels = 1.0;
            for (std::size_t axis = 0; axis < dimension; ++axis) {
                const double size = t.fixed_values[axis];
                if (!(size >= 1.0 && size <= 1e9 && std::floor(size) == size)) {
                    fail(what + ": the field's size along axis " + std::to_string(axis) + " is " + std::to_string(size) +
                         ", not a whole number of voxels");
                }
                voxels *= size;
            }
            if (voxels * static_cast<double>(dimension) != static_cast<double>(t.parameters)) {
                fail(what + ": a grid of " + std::to_string(static_cast<std::uint64_t>(voxels)) + " points takes " +
                     std::to_string(static_cast<std::uint64_t>(voxels) * dimension) + " parameters, found " +
                     std::to_string(t.parameters));
            }
            for (double value : t.fixed_values) {
                if (!std::isfinite(value)) fail(what + ": a non-finite fixed parameter");
            }
            continue;
        }
        const std::size_t expected = expected_parameter_count(parsed.kind, dimension);
        if (expected == 0) {
            fail(what + " is not supported (gridwarp reads linear ITK transforms, translations, B-spline and displacement "
                        "field transforms, composites of them, and displacement field images)");
        }
        if (!t.has_parameters || !t.has_fixed_parameters) fail(what + ": expected both Parameters and FixedParameters");
        if (t.parameters != expected) {
            fail(what + ": expected " + std::to_string(expected) + " parameters, found " + std::to_string(t.parameters));
        }
        // The fixed parameters of the linear kinds are their centre (Euler3D may add its ZYX flag);
        // a translation has none.
        const bool centred = parsed.kind != "TranslationTransform";
        const std::size_t most = parsed.kind == "Euler3DTransform" ? dimension + 1 : dimension;
        if (t.fixed_parameters > most || (centred && t.fixed_parameters < dimension)) {
            fail(what + ": expected " + std::string(centred ? "" : "0 or ") + std::to_string(dimension) +
                 " fixed parameters (the centre), found " + std::to_string(t.fixed_parameters));
        }
    }
}

std::optional<TransformFile> parse_itk_transform(std::string_view bytes, ItkTransformEncoding encoding, const fs::path& source,
                                                 std::size_t dimension) {
    const FileProblem fail(source);
    const std::vector<DeclaredTransform> transforms =
        encoding == ItkTransformEncoding::Text ? parse_text(bytes, fail) : parse_matlab(bytes, fail);
    std::vector<ItkTransformDeclaration> declarations;
    for (const DeclaredTransform& t : transforms) {
        declarations.push_back({t.type, t.parameters.size(), t.fixed.size(), t.has_parameters, t.has_fixed,
                                (encoding == ItkTransformEncoding::Text ? "line " : "matrix ") + std::to_string(t.line), t.fixed});
    }
    check_itk_transform_declarations(declarations, dimension, source);
    TransformFile result;
    for (const DeclaredTransform& t : transforms) {
        if (t.kind == "CompositeTransform") continue;  // the header of the transforms that follow
        if (t.kind == "BSplineTransform") {
            // ITK registers only cubic B-spline transforms for its files.
            append_bspline_transform(t.fixed, t.parameters, dimension, 3, result, source);
            continue;
        }
        Matrix matrix;
        std::vector<double> translation;
        if (!linear_parts(t, dimension, matrix, translation)) return std::nullopt;
        // ITK: p' = M (p - c) + c + t, c the centre (fixed parameters; TranslationTransform has none).
        std::vector<double> centre(dimension, 0.0);
        if (t.kind != "TranslationTransform") {
            std::copy(t.fixed.begin(), t.fixed.begin() + static_cast<std::ptrdiff_t>(dimension), centre.begin());
        }
        AffineMap map = AffineMap::identity(dimension);
        map.matrix = matrix;
        for (std::size_t i = 0; i < dimension; ++i) {
            double offset = translation[i] + centre[i];
            for (std::size_t j = 0; j < dimension; ++j) offset -= matrix[i * dimension + j] * centre[j];
            map.offset[i] = offset;
        }
        PointTransform step;
        step.affine = std::make_shared<const AffineMap>(std::move(map));
        result.steps.push_back(std::move(step));
    }
    return result;
}

}  // namespace gridwarp::io
