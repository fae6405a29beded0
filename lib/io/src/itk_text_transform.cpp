// ITK's text transform format ("#Insight Transform File V1.0", .tfm/.txt) for the linear kinds
// registration tools write most, read without ITK so that such a resample never loads the ITK
// module (backends.hpp). The parameterisations follow ITK 5.2's SetParameters/ComputeMatrix of each
// kind. Anything else (other kinds, odd files) is left to ITK's own reader: see transform_io.cpp.
#include <cmath>
#include <sstream>

#include "formats.hpp"
#include "gridwarp/io/atomic_file.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

struct TextTransform {
    std::string kind;  // "AffineTransform", ...
    std::size_t input_dimension = 0, output_dimension = 0;
    std::vector<double> parameters, fixed;
    bool has_parameters = false, has_fixed = false;
};

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

// "AffineTransform_double_3_3" -> kind, dimensions.
bool parse_type(const std::string& name, TextTransform& transform) {
    const auto last = name.rfind('_');
    if (last == std::string::npos) return false;
    const auto middle = name.rfind('_', last - 1);
    if (middle == std::string::npos || middle == 0) return false;
    const auto precision = name.rfind('_', middle - 1);
    if (precision == std::string::npos) return false;
    const std::string type = name.substr(precision + 1, middle - precision - 1);
    if (type != "double" && type != "float") return false;
    transform.kind = name.substr(0, precision);
    try {
        transform.input_dimension = std::stoul(name.substr(middle + 1, last - middle - 1));
        transform.output_dimension = std::stoul(name.substr(last + 1));
    } catch (const std::exception&) {
        return false;
    }
    return true;
}

bool parse_file(const std::string& text, std::vector<TextTransform>& transforms) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) return false;
        const std::string key = line.substr(0, colon), value = line.substr(colon + 1);
        if (key == "Transform") {
            TextTransform transform;
            std::istringstream name(value);
            std::string type;
            name >> type;
            if (!parse_type(type, transform)) return false;
            transforms.push_back(transform);
        } else if (key == "Parameters" && !transforms.empty() && !transforms.back().has_parameters) {
            transforms.back().has_parameters = parse_numbers(value, transforms.back().parameters);
            if (!transforms.back().has_parameters) return false;
        } else if (key == "FixedParameters" && !transforms.empty() && !transforms.back().has_fixed) {
            transforms.back().has_fixed = parse_numbers(value, transforms.back().fixed);
            if (!transforms.back().has_fixed) return false;
        } else {
            return false;
        }
    }
    return !transforms.empty();
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

// The matrix and translation of one transform, or false when the kind (or its parameter count)
// is not one this reader knows.
bool linear_parts(const TextTransform& t, std::size_t d, Matrix& matrix, std::vector<double>& translation) {
    const auto& p = t.parameters;
    const auto n = p.size();
    matrix.assign(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i) matrix[i * d + i] = 1.0;
    translation.assign(d, 0.0);
    if (t.kind == "AffineTransform" || t.kind == "MatrixOffsetTransformBase") {
        if (n != d * d + d) return false;
        std::copy(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(d * d), matrix.begin());
        std::copy(p.begin() + static_cast<std::ptrdiff_t>(d * d), p.end(), translation.begin());
    } else if (t.kind == "TranslationTransform") {
        if (n != d) return false;
        translation = p;
    } else if (t.kind == "Euler3DTransform" && d == 3) {
        if (n != 6) return false;
        const double cx = std::cos(p[0]), sx = std::sin(p[0]), cy = std::cos(p[1]), sy = std::sin(p[1]), cz = std::cos(p[2]),
                     sz = std::sin(p[2]);
        const Matrix rx{1, 0, 0, 0, cx, -sx, 0, sx, cx}, ry{cy, 0, sy, 0, 1, 0, -sy, 0, cy}, rz{cz, -sz, 0, sz, cz, 0, 0, 0, 1};
        const bool zyx = t.fixed.size() == 4 && t.fixed[3] != 0.0;  // ITK's ComputeZYX, serialised as a 4th fixed value
        matrix = zyx ? multiply(multiply(rz, ry, 3), rx, 3) : multiply(multiply(rz, rx, 3), ry, 3);
        translation = {p[3], p[4], p[5]};
    } else if (t.kind == "VersorRigid3DTransform" && d == 3) {
        if (n != 6) return false;
        matrix = versor_matrix(p[0], p[1], p[2]);
        translation = {p[3], p[4], p[5]};
    } else if (t.kind == "Similarity3DTransform" && d == 3) {
        if (n != 7) return false;
        matrix = versor_matrix(p[0], p[1], p[2]);
        for (double& v : matrix) v *= p[6];
        translation = {p[3], p[4], p[5]};
    } else if ((t.kind == "Euler2DTransform" || t.kind == "Rigid2DTransform") && d == 2) {
        if (n != 3) return false;
        const double c = std::cos(p[0]), s = std::sin(p[0]);
        matrix = {c, -s, s, c};
        translation = {p[1], p[2]};
    } else if (t.kind == "Similarity2DTransform" && d == 2) {
        if (n != 4) return false;
        const double c = std::cos(p[1]) * p[0], s = std::sin(p[1]) * p[0];
        matrix = {c, -s, s, c};
        translation = {p[2], p[3]};
    } else {
        return false;
    }
    return true;
}

}  // namespace

std::optional<std::vector<PointTransform>> read_itk_text_transform(const fs::path& file, std::size_t dimension) {
    std::vector<TextTransform> transforms;
    if (!parse_file(read_file_bytes(file), transforms)) return std::nullopt;
    std::vector<PointTransform> steps;
    for (std::size_t k = 0; k < transforms.size(); ++k) {
        const TextTransform& t = transforms[k];
        if (t.input_dimension != dimension || t.output_dimension != dimension) return std::nullopt;
        if (t.kind == "CompositeTransform") {
            if (k != 0 || t.has_parameters) return std::nullopt;  // the header of the transforms that follow
            continue;
        }
        Matrix matrix;
        std::vector<double> translation;
        if (!t.has_parameters || !linear_parts(t, dimension, matrix, translation)) return std::nullopt;
        // ITK: p' = M (p - c) + c + t, c the centre (fixed parameters; TranslationTransform has none).
        std::vector<double> centre(dimension, 0.0);
        if (t.kind != "TranslationTransform") {
            if (t.fixed.size() < dimension) return std::nullopt;
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
        steps.push_back(std::move(step));
    }
    if (steps.empty()) return std::nullopt;
    return steps;
}

}  // namespace gridwarp::io::detail
