#include "transforms/transform_wire.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'G', 'W', 'T', 'F', 'I', 'L', 'E', '1'};
enum StepKind : std::uint64_t { kAffineStep = 1, kFieldStep = 2, kBSplineStep = 3 };
constexpr std::uint64_t kMostSteps = 1 << 20;

void put_u64(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }

void put_doubles(std::string& out, const std::vector<double>& values) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

void put_map(std::string& out, const AffineMap& map) {
    put_u64(out, map.dimension);
    put_doubles(out, map.matrix);
    put_doubles(out, map.offset);
}

class Reader {
public:
    Reader(std::string_view bytes, const fs::path& source) : bytes_(bytes), source_(source) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw FileError(source_, "the HDF5 reader's process returned a malformed result (" + what + ")");
    }
    std::uint64_t u64() {
        std::uint64_t value = 0;
        take(&value, sizeof value);
        return value;
    }
    void take(void* out, std::size_t count) {
        if (count > bytes_.size() - at_) fail("it ends early");
        std::memcpy(out, bytes_.data() + at_, count);
        at_ += count;
    }
    std::size_t left() const { return bytes_.size() - at_; }
    AffineMap map(std::size_t dimension) {
        if (u64() != dimension) fail("a map of another dimension");
        AffineMap result = AffineMap::identity(dimension);
        take(result.matrix.data(), result.matrix.size() * sizeof(double));
        take(result.offset.data(), result.offset.size() * sizeof(double));
        for (double v : result.matrix) {
            if (!std::isfinite(v)) fail("a non-finite matrix entry");
        }
        for (double v : result.offset) {
            if (!std::isfinite(v)) fail("a non-finite offset");
        }
        return result;
    }

private:
    std::string_view bytes_;
    const fs::path& source_;
    std::size_t at_ = 0;
};

}  // namespace

std::string encode_transform_file(const TransformFile& transforms) {
    std::string out(kMagic, sizeof kMagic);
    put_u64(out, transforms.steps.size());
    for (const PointTransform& step : transforms.steps) {
        if (step.affine) {
            put_u64(out, kAffineStep);
            put_map(out, *step.affine);
            continue;
        }
        const int order = step.field->bspline_order();
        put_u64(out, order > 0 ? kBSplineStep : kFieldStep);
        if (order > 0) put_u64(out, static_cast<std::uint64_t>(order));
        // The reader's fields are C-ordered float64 already: written from where they are.
        const ConstTensorView& vectors = step.field->vectors();
        Tensor converted;
        if (vectors.dtype != DType::Float64 || !is_c_ordered(vectors)) converted = convert_to(vectors, DType::Float64);
        const ConstTensorView values = converted.data() ? converted.view() : vectors;
        put_u64(out, values.shape.size());
        for (std::int64_t extent : values.shape) put_u64(out, static_cast<std::uint64_t>(extent));
        put_map(out, step.field->index_to_point());
        out.append(static_cast<const char*>(values.data), static_cast<std::size_t>(values.numel()) * sizeof(double));
    }
    put_u64(out, transforms.warnings.size());
    for (const std::string& warning : transforms.warnings) {
        put_u64(out, warning.size());
        out += warning;
    }
    return out;
}

TransformFile decode_transform_file(std::string_view bytes, std::size_t dimension, const fs::path& source) {
    Reader in(bytes, source);
    char magic[sizeof kMagic];
    in.take(magic, sizeof magic);
    if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) in.fail("no signature");
    TransformFile result;
    result.format = TransformFormat::Itk;
    const std::uint64_t steps = in.u64();
    if (steps == 0 || steps > kMostSteps) in.fail(std::to_string(steps) + " steps");
    for (std::uint64_t s = 0; s < steps; ++s) {
        const std::uint64_t kind = in.u64();
        PointTransform step;
        if (kind == kAffineStep) {
            step.affine = std::make_shared<const AffineMap>(in.map(dimension));
        } else if (kind == kFieldStep || kind == kBSplineStep) {
            const std::uint64_t order = kind == kBSplineStep ? in.u64() : 0;
            if (order > 3) in.fail("a B-spline of order " + std::to_string(order));
            if (in.u64() != dimension + 1) in.fail("a field of another rank");
            Shape shape;
            std::uint64_t values = 1;
            for (std::size_t axis = 0; axis <= dimension; ++axis) {
                const std::uint64_t extent = in.u64();
                if (extent == 0 || extent > in.left() || values > in.left() / extent) in.fail("a field larger than its bytes");
                values *= extent;
                shape.push_back(static_cast<std::int64_t>(extent));
            }
            if (static_cast<std::uint64_t>(shape.back()) != dimension) in.fail("a field of other vectors");
            const AffineMap geometry = in.map(dimension);
            if (values > in.left() / sizeof(double)) in.fail("a field larger than its bytes");
            auto tensor = std::make_shared<Tensor>(DType::Float64, shape);
            in.take(tensor->data(), values * sizeof(double));
            for (std::uint64_t i = 0; i < values; ++i) {
                if (!std::isfinite(tensor->data_as<double>()[i])) throw FileError(source, "the displacement field holds a non-finite value");
            }
            try {
                const ConstTensorView vectors = std::const_pointer_cast<const Tensor>(tensor)->view();
                step.field = std::make_shared<const DisplacementField>(order > 0 ? DisplacementField::bspline(vectors, geometry, static_cast<int>(order))
                                                                                 : DisplacementField(vectors, geometry));
            } catch (const std::invalid_argument& e) {
                throw FileError(source, e.what());
            }
            result.buffers.push_back(std::move(tensor));
        } else {
            in.fail("an unknown step kind");
        }
        result.steps.push_back(std::move(step));
    }
    const std::uint64_t warnings = in.u64();
    if (warnings > 1024) in.fail("too many warnings");
    for (std::uint64_t w = 0; w < warnings; ++w) {
        const std::uint64_t length = in.u64();
        if (length > in.left()) in.fail("it ends early");
        std::string text(length, '\0');
        in.take(text.data(), length);
        result.warnings.push_back(std::move(text));
    }
    if (in.left() != 0) in.fail("bytes after the end");
    return result;
}

}  // namespace gridwarp::io::detail
