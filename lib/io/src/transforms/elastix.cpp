// elastix TransformParameters files (elastix -out DIR writes TransformParameters.N.txt; transformix
// reads them). Lines are "(Name value ...)" entries, values numbers or quoted strings, "//" starts
// a comment. A file maps fixed-image points to moving-image points in ITK's LPS millimetres, as
// gridwarp's transforms do; InitialTransformParametersFileName names the transform that acts first
// (HowToCombineTransforms "Compose"). The linear kinds are ITK's classes with elastix's parameter
// order, read through the ITK reader's parameterisations; see docs/formats.md.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "gridwarp/io/error.hpp"
#include "files/file_checks.hpp"
#include "names.hpp"
#include "transforms/transform_formats.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

// elastix chains a few transforms (an affine stage, a B-spline stage); more is a loop or an attack.
constexpr std::size_t kMostChainedFiles = 64;
// A B-spline grid's coefficients in a text file: far more than any registration writes.
constexpr std::uint64_t kMostParameters = std::uint64_t{1} << 27;
constexpr std::uintmax_t kMostFileBytes = std::uintmax_t{1} << 31;

struct ElastixEntry {
    std::vector<std::string> words;  // strings unquoted, numbers as written
    std::size_t line = 0;
};
using ElastixEntries = std::map<std::string, ElastixEntry>;

ElastixEntries parse_entries(const std::string& text, const fs::path& file) {
    ElastixEntries entries;
    std::size_t line = 1;
    for (std::size_t at = 0; at < text.size();) {
        const char c = text[at];
        if (c == '\n') {
            ++line, ++at;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ++at;
        } else if (c == '/' && at + 1 < text.size() && text[at + 1] == '/') {
            at = std::min(text.find('\n', at), text.size());
        } else if (c == '(') {
            const std::size_t start_line = line;
            ElastixEntry entry;
            entry.line = start_line;
            ++at;
            while (true) {
                while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' || text[at] == '\n')) {
                    if (text[at] == '\n') ++line;
                    ++at;
                }
                if (at >= text.size()) throw FileError(file, "line " + std::to_string(start_line) + ": an entry without its closing ')'");
                if (text[at] == ')') {
                    ++at;
                    break;
                }
                if (text[at] == '"') {
                    const std::size_t close = text.find('"', at + 1);
                    if (close == std::string::npos) throw FileError(file, "line " + std::to_string(line) + ": a string without its closing quote");
                    entry.words.push_back(text.substr(at + 1, close - at - 1));
                    line += static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(close), '\n'));
                    at = close + 1;
                } else {
                    const std::size_t end = text.find_first_of(" \t\r\n)", at);
                    entry.words.push_back(text.substr(at, end - at));
                    at = end == std::string::npos ? text.size() : end;
                }
            }
            if (entry.words.empty()) throw FileError(file, "line " + std::to_string(start_line) + ": an empty entry '()'");
            std::string name = entry.words.front();
            entry.words.erase(entry.words.begin());
            if (!entries.emplace(name, std::move(entry)).second) {
                throw FileError(file, "line " + std::to_string(start_line) + ": a second (" + name + " ...) entry");
            }
        } else {
            throw FileError(file, "line " + std::to_string(line) + ": expected '(Name value ...)' or a // comment, found '" +
                                      text.substr(at, std::min<std::size_t>(40, text.find('\n', at) - at)) + "'");
        }
    }
    return entries;
}

class ElastixFile {
public:
    ElastixFile(ElastixEntries entries, fs::path file) : entries_(std::move(entries)), file_(std::move(file)) {}

    bool has(const std::string& name) const { return entries_.count(name) > 0; }
    std::string text(const std::string& name) const {
        const ElastixEntry& entry = find(name);
        if (entry.words.size() != 1) fail(entry, name + " must hold one value");
        return entry.words.front();
    }
    std::string text_or(const std::string& name, const std::string& otherwise) const { return has(name) ? text(name) : otherwise; }
    std::vector<double> numbers(const std::string& name, std::size_t count) const {
        const ElastixEntry& entry = find(name);
        if (entry.words.size() != count) {
            fail(entry, name + " must hold " + std::to_string(count) + " numbers, found " + std::to_string(entry.words.size()));
        }
        std::vector<double> values;
        values.reserve(count);
        for (const std::string& word : entry.words) {
            char* end = nullptr;
            const double value = std::strtod(word.c_str(), &end);
            if (word.empty() || *end != '\0' || !std::isfinite(value)) fail(entry, name + " holds '" + word.substr(0, 40) + "', not a finite number");
            values.push_back(value);
        }
        return values;
    }
    double number(const std::string& name) const { return numbers(name, 1).front(); }
    std::size_t count(const std::string& name) const { return find(name).words.size(); }
    const fs::path& file() const { return file_; }
    [[noreturn]] void fail(const std::string& problem) const { throw FileError(file_, problem); }

private:
    const ElastixEntry& find(const std::string& name) const {
        const auto entry = entries_.find(name);
        if (entry == entries_.end()) throw FileError(file_, "an elastix transform needs a (" + name + " ...) entry");
        return entry->second;
    }
    [[noreturn]] void fail(const ElastixEntry& entry, const std::string& problem) const {
        throw FileError(file_, "line " + std::to_string(entry.line) + ": " + problem);
    }

    ElastixEntries entries_;
    fs::path file_;
};

std::string number_list(const std::vector<double>& values) {
    std::string text;
    char buffer[32];
    for (double value : values) {
        std::snprintf(buffer, sizeof buffer, "%.17g ", value);
        text += buffer;
    }
    return text;
}

// elastix writes direction matrices column by column; ITK's fixed parameters hold them row by row.
std::vector<double> rows_from_columns(const std::vector<double>& columns, std::size_t d) {
    std::vector<double> rows(d * d);
    for (std::size_t i = 0; i < d; ++i) {
        for (std::size_t j = 0; j < d; ++j) rows[i * d + j] = columns[j * d + i];
    }
    return rows;
}

// A linear elastix transform as the ITK text transform of the same class, read by the ITK reader.
TransformFile linear_transform(const ElastixFile& in, const std::string& kind, std::size_t d) {
    const std::size_t count = static_cast<std::size_t>(in.number("NumberOfParameters"));
    const std::vector<double> parameters = in.numbers("TransformParameters", count);
    std::string itk_kind;
    std::vector<double> fixed;
    if (kind == "TranslationTransform") {
        itk_kind = "TranslationTransform";
    } else {
        fixed = in.numbers("CenterOfRotationPoint", d);
        if (kind == "EulerTransform") {
            itk_kind = d == 2 ? "Euler2DTransform" : "Euler3DTransform";
            if (d == 3 && in.text_or("ComputeZYX", "false") == "true") fixed.push_back(1.0);
        } else if (kind == "SimilarityTransform") {
            itk_kind = d == 2 ? "Similarity2DTransform" : "Similarity3DTransform";
        } else {
            itk_kind = "AffineTransform";
        }
    }
    const std::string dimension = std::to_string(d);
    const std::string itk_text = "#Insight Transform File V1.0\n#Transform 0\nTransform: " + itk_kind + "_double_" + dimension + "_" + dimension +
                                 "\nParameters: " + number_list(parameters) + "\nFixedParameters: " + number_list(fixed) + "\n";
    std::optional<TransformFile> read = parse_itk_transform(itk_text, ItkTransformEncoding::Text, in.file(), d);
    if (!read) in.fail("the " + kind + " could not be computed");
    return std::move(*read);
}

TransformFile bspline_transform(const ElastixFile& in, std::size_t d) {
    const double order = in.has("BSplineTransformSplineOrder") ? in.number("BSplineTransformSplineOrder") : 3.0;
    if (order != 1.0 && order != 2.0 && order != 3.0) in.fail("BSplineTransformSplineOrder must be 1, 2 or 3");
    if (in.text_or("UseCyclicTransform", "false") == "true") in.fail("cyclic B-spline transforms (UseCyclicTransform \"true\") are not supported");
    for (double index : in.numbers("GridIndex", d)) {
        if (index != 0.0) in.fail("a B-spline grid whose GridIndex is not 0 is not supported");
    }
    std::vector<double> fixed = in.numbers("GridSize", d);
    double points = 1;
    for (double size : fixed) points *= size;
    const double declared = in.number("NumberOfParameters");
    if (!(declared >= 1 && declared <= static_cast<double>(kMostParameters) && declared == points * static_cast<double>(d))) {
        in.fail("NumberOfParameters is " + std::to_string(declared) + "; a B-spline grid of GridSize " + number_list(fixed) + "takes " +
                std::to_string(points * static_cast<double>(d)));
    }
    if (in.count("TransformParameters") != static_cast<std::size_t>(declared)) {
        in.fail("TransformParameters holds " + std::to_string(in.count("TransformParameters")) + " values, NumberOfParameters says " +
                std::to_string(static_cast<std::uint64_t>(declared)));
    }
    const std::vector<double> parameters = in.numbers("TransformParameters", static_cast<std::size_t>(declared));
    for (const char* name : {"GridOrigin", "GridSpacing"}) {
        const std::vector<double> values = in.numbers(name, d);
        fixed.insert(fixed.end(), values.begin(), values.end());
    }
    const std::vector<double> direction = in.has("GridDirection") ? rows_from_columns(in.numbers("GridDirection", d * d), d) : [&] {
        std::vector<double> identity(d * d, 0.0);
        for (std::size_t i = 0; i < d; ++i) identity[i * d + i] = 1.0;
        return identity;
    }();
    fixed.insert(fixed.end(), direction.begin(), direction.end());
    TransformFile result;
    append_bspline_transform(fixed, parameters, d, static_cast<int>(order), result, in.file());
    return result;
}

std::string read_small_text(const fs::path& file) {
    std::error_code error;
    const auto size = fs::file_size(file, error);
    if (error) throw FileError(file, "cannot be read: " + error.message());
    if (size > kMostFileBytes) throw FileError(file, "is " + std::to_string(size) + " bytes, more than an elastix transform file holds");
    return read_file_bytes(file);
}

// One file and the files it names as its initial transforms, the initial ones acting first.
void read_chain(const fs::path& file, std::size_t dimension, const ReadOptions& options, std::set<fs::path>& seen, TransformFile& result) {
    std::error_code error;
    const fs::path identity = fs::weakly_canonical(file, error);
    if (!seen.insert(error ? file : identity).second) throw FileError(file, "names itself, through InitialTransformParametersFileName");
    if (seen.size() > kMostChainedFiles) throw FileError(file, "chains more than " + std::to_string(kMostChainedFiles) + " elastix transform files");
    const std::string text = read_small_text(file);
    if (!looks_like_text(std::string_view(text).substr(0, 4096))) throw FileError(file, "is not an elastix transform parameter file (not text)");
    const ElastixFile in(parse_entries(text, file), file);
    for (const char* name : {"FixedImageDimension", "MovingImageDimension"}) {
        if (in.has(name) && in.number(name) != static_cast<double>(dimension)) {
            in.fail(std::string(name) + " is " + std::to_string(static_cast<int>(in.number(name))) + ", the images are " +
                    std::to_string(dimension) + "-D");
        }
    }
    if (in.text_or("UseDirectionCosines", "true") != "true") {
        in.fail("UseDirectionCosines \"false\": elastix ignored the images' directions when it wrote this, so its points are not "
                "the images' physical points");
    }
    const std::string kind = in.text("Transform");
    TransformFile own;
    if (kind == "TranslationTransform" || kind == "EulerTransform" || kind == "SimilarityTransform" || kind == "AffineTransform") {
        own = linear_transform(in, kind, dimension);
    } else if (kind == "BSplineTransform" || kind == "RecursiveBSplineTransform") {
        own = bspline_transform(in, dimension);
    } else {
        in.fail("elastix's " + kind + " is not supported (Translation, Euler, Similarity, Affine and BSpline transforms are)");
    }
    result.steps.insert(result.steps.end(), own.steps.begin(), own.steps.end());
    result.buffers.insert(result.buffers.end(), own.buffers.begin(), own.buffers.end());
    const std::string initial = in.text_or("InitialTransformParametersFileName", "NoInitialTransform");
    if (initial == "NoInitialTransform") return;
    const std::string combination = in.text_or("HowToCombineTransforms", "Compose");
    if (combination != "Compose") {
        in.fail("HowToCombineTransforms \"" + combination + "\" is not supported (only \"Compose\")");
    }
    // elastix writes the path it was given: absolute, or relative to where it ran. Its files travel
    // as a folder, so the name is looked up beside this file, and only there: a transform file
    // cannot make gridwarp read a file elsewhere (the containment rule of companion files).
    const fs::path next = file.parent_path() / fs::path(initial).filename();
    if (!fs::exists(next)) {
        throw FileError(file, "its initial transform " + initial + " is not beside it (" + next.filename().string() +
                              " in its folder): elastix chains are read from one folder");
    }
    require_companion_inside(file, next, "initial transform", options);
    read_chain(next, dimension, options, seen, result);
}

}  // namespace

bool detects_elastix(const std::string&, std::string_view head) {
    // elastix starts every file with its (Transform "...") entry, after comments at most.
    std::size_t at = 0;
    while (at < head.size()) {
        at = head.find_first_not_of(" \t\r\n", at);
        if (at == std::string_view::npos) return false;
        if (head.substr(at, 2) == "//") {
            at = head.find('\n', at);
            continue;
        }
        return head.substr(at, 11) == "(Transform " || head.substr(at, 11) == "(Transform\t";
    }
    return false;
}

TransformFile read_elastix(const TransformSpec& spec, const TransformContext& context, const ReadOptions& options) {
    TransformFile result;
    result.format = TransformFormat::Elastix;
    std::set<fs::path> seen;
    read_chain(spec.file, context.dimension, options, seen, result);
    return result;
}

}  // namespace gridwarp::io::detail
