// DICOM series, read by gridwarp itself: each file's elements are walked and checked up to its
// pixel data before any pixels are read, and uncompressed pixels are read straight from the file.
// Only compressed pixel data goes to GDCM, in the ITK module (decode_dicom_pixels), so a series of
// uncompressed slices loads no library. Not itk::GDCMSeriesFileNames: that sorter silently stacks
// series with missing slices, uneven spacing or mixed orientations.

#include <algorithm>
#include <array>
#include <cmath>
#include <cctype>
#include <cstring>
#include <iterator>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <type_traits>

#include "gridwarp/io/error.hpp"
#include "formats/dicom.hpp"
#include "modules/backends.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

using Vector3 = std::array<double, 3>;

// Beyond this a position or spacing is no scanner's millimetres (the bound the NIfTI and MRtrix3
// readers put on their transforms).
constexpr double kLargestCoordinate = 1e10;

// What one file of a series says about its slice, read from its header alone.
struct SliceHeader {
    fs::path file;
    std::string series_uid, description, transfer_syntax;
    std::int64_t rows = 0, columns = 0, frames = 1, samples = 1, bits_allocated = 0, bits_stored = 0, high_bit = 0, pixel_representation = 0;
    bool encapsulated = false;                         // compressed pixel data, decoded by GDCM
    std::uint64_t pixel_offset = 0, pixel_length = 0;  // native pixel data's place in the file
    std::array<double, 2> pixel_spacing{};  // DICOM's order: between rows, between columns
    Vector3 row_direction{}, column_direction{}, position{};
    double slope = 1.0, intercept = 0.0;
    double slice_thickness = 0.0;  // 0: absent
    double repetition_time_ms = 0.0;  // 0: absent
    std::uint64_t file_size = 0;
};

double dot(const Vector3& a, const Vector3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vector3 cross(const Vector3& a, const Vector3& b) {
    return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

std::string trimmed(std::string text) {
    const auto blank = [](unsigned char c) { return c == ' ' || c == '\0' || c == '\t' || c == '\r' || c == '\n'; };
    while (!text.empty() && blank(text.back())) text.pop_back();
    std::size_t start = 0;
    while (start < text.size() && blank(text[start])) ++start;
    return text.substr(start);
}

// A DICOM decimal string's values (backslash-separated); throws naming the file and attribute.
std::vector<double> decimals(const std::string& text, const fs::path& file, const char* attribute, std::size_t count) {
    std::vector<double> values;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, '\\')) {
        item = trimmed(item);
        char* end = nullptr;
        const double value = std::strtod(item.c_str(), &end);
        if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(value)) {
            throw FileError(file, std::string(attribute) + " is not a list of numbers: '" + trimmed(text) + "'");
        }
        values.push_back(value);
    }
    if (values.size() != count) {
        throw FileError(file, std::string(attribute) + " holds " + std::to_string(values.size()) + " values, expected " +
                                  std::to_string(count) + (values.empty() ? " (the attribute is missing)" : ""));
    }
    return values;
}

std::int64_t integer_attribute(const std::string& text, const fs::path& file, const char* attribute, std::int64_t absent) {
    const std::string value = trimmed(text);
    if (value.empty()) return absent;
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (end != value.c_str() + value.size()) throw FileError(file, std::string(attribute) + " is not a whole number: '" + value + "'");
    return number;
}

// Whether the file has a DICOM Part 10 preamble ("DICM" at byte 128); other files in the folder
// (a README, a DICOMDIR's neighbours' thumbnails) are not part of any series.
bool has_dicom_preamble(const fs::path& file) {
    std::ifstream stream(file, std::ios::binary);
    char magic[132] = {};
    return stream.read(magic, sizeof magic) && std::memcmp(magic + 128, "DICM", 4) == 0;
}

// What ElementWalk finds: the transfer syntax, the text of the data set's top-level elements asked
// for (numbers of binary VRs written out in decimal, multiple values separated by '\\', as
// DICOM's text VRs hold them), and where the pixel data lies.
struct WalkResult {
    std::string transfer_syntax;
    std::map<std::uint32_t, std::string> values;  // by tag, (group << 16) | element
    bool has_pixel_data = false, encapsulated = false;
    std::uint64_t pixel_offset = 0, pixel_length = 0;
};

// A walk over a Part 10 file's elements, up to its pixel data, that every element, sequence and
// item lies inside the file and is well formed. GDCM asserts (aborting the process) on many cut or
// garbled files where it would otherwise return an error, so a file is given to it only once this
// walk has passed. Only the values asked for are read; the pixel data's length or fragments are
// checked against the file's size.
class ElementWalk {
public:
    ElementWalk(const fs::path& file, std::uint64_t file_size, const std::set<std::uint32_t>& wanted)
        : file_(file), size_(file_size), stream_(file, std::ios::binary), wanted_(wanted) {}

    WalkResult run() {
        std::uint64_t at = 132;
        // The meta group is always explicit VR little endian; it says how the data set is encoded.
        std::string transfer_syntax;
        std::uint64_t meta_end = 0;  // where (0002,0000), the group's length, says the group ends
        while (at + 8 <= size_ && u16(at) == 0x0002) {
            const Element element = element_at(at, true);
            if (element.undefined) fail("the file meta information holds an element of undefined length");
            if (u16(at + 2) == 0x0000 && element.length == 4) meta_end = element.value_at + 4 + u32(element.value_at);
            if (u16(at + 2) == 0x0010) transfer_syntax = text(element.value_at, element.length);
            at = element.value_at + element.length;
        }
        if (at < meta_end || at >= size_) fail("the file ends in or just after its file meta information (truncated)");
        while (!transfer_syntax.empty() && (transfer_syntax.back() == '\0' || transfer_syntax.back() == ' ')) transfer_syntax.pop_back();
        if (transfer_syntax == "1.2.840.10008.1.2.1.99") fail("its data set is deflated (Deflated Explicit VR Little Endian), which gridwarp does not read");
        if (transfer_syntax == "1.2.840.10008.1.2.2") fail("its data set is big-endian (Explicit VR Big Endian, retired), which gridwarp does not read");
        explicit_vr_ = transfer_syntax != "1.2.840.10008.1.2";
        result_.transfer_syntax = transfer_syntax;
        walk_items_or_elements(at, size_, 0, false);
        return std::move(result_);
    }

private:
    struct Element {
        std::uint64_t value_at = 0, length = 0;
        bool undefined = false, sequence = false;
    };
    static constexpr std::uint32_t kUndefined = 0xffffffffu;
    static constexpr int kDeepest = 16;

    [[noreturn]] void fail(const std::string& what) const { throw FileError(file_, what); }

    // Reads the file up to `end` (sequentially: the elements before the pixel data are small).
    void have(std::uint64_t end) {
        if (end > size_) fail("an element runs past the end of the file (truncated)");
        if (end <= bytes_.size()) return;
        const std::size_t old = bytes_.size();
        const std::size_t want = static_cast<std::size_t>(std::max<std::uint64_t>(end, std::min<std::uint64_t>(size_, old + 65536)));
        bytes_.resize(want);
        stream_.seekg(static_cast<std::streamoff>(old));
        if (!stream_.read(reinterpret_cast<char*>(bytes_.data() + old), static_cast<std::streamsize>(want - old))) fail("cannot read the file");
    }
    unsigned u16(std::uint64_t at) {
        have(at + 2);
        return bytes_[at] | (bytes_[at + 1] << 8);
    }
    std::uint32_t u32(std::uint64_t at) {
        have(at + 4);
        return static_cast<std::uint32_t>(bytes_[at]) | (static_cast<std::uint32_t>(bytes_[at + 1]) << 8) |
               (static_cast<std::uint32_t>(bytes_[at + 2]) << 16) | (static_cast<std::uint32_t>(bytes_[at + 3]) << 24);
    }
    std::string text(std::uint64_t at, std::uint64_t length) {
        have(at + length);
        return std::string(reinterpret_cast<const char*>(bytes_.data() + at), static_cast<std::size_t>(std::min<std::uint64_t>(length, 256)));
    }

    Element element_at(std::uint64_t at, bool explicit_vr) {
        have(at + 8);
        Element element;
        if (!explicit_vr) {
            element.length = u32(at + 4);
            element.value_at = at + 8;
        } else {
            const char vr[3] = {static_cast<char>(bytes_[at + 4]), static_cast<char>(bytes_[at + 5]), 0};
            static constexpr const char* kShort[] = {"AE", "AS", "AT", "CS", "DA", "DS", "DT", "FD", "FL", "IS", "LO", "LT", "PN",
                                                     "SH", "SL", "SS", "ST", "TM", "UI", "UL", "US"};
            static constexpr const char* kLong[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT", "UV"};
            const auto named = [&](const auto& list) {
                return std::any_of(std::begin(list), std::end(list), [&](const char* one) { return std::strcmp(one, vr) == 0; });
            };
            if (named(kShort)) {
                element.length = u16(at + 6);
                element.value_at = at + 8;
            } else if (named(kLong)) {
                element.length = u32(at + 8);
                element.value_at = at + 12;
                element.sequence = std::strcmp(vr, "SQ") == 0;
            } else {
                fail("an element's value representation '" + std::string(std::isprint(static_cast<unsigned char>(vr[0])) && std::isprint(static_cast<unsigned char>(vr[1])) ? vr : "??") +
                     "' is not DICOM's (corrupt header)");
            }
        }
        element.undefined = element.length == kUndefined;
        if (element.undefined) element.length = 0;
        if (element.value_at + element.length > size_) fail("an element runs past the end of the file (truncated)");
        return element;
    }

    // Elements (or, `items`, the items of a sequence) from `at` to `end`; with end unknown (an
    // undefined length) up to the delimiter, whose end is returned.
    std::uint64_t walk_items_or_elements(std::uint64_t at, std::uint64_t end, int depth, bool items, bool until_delimiter = false) {
        if (depth > kDeepest) fail("sequences nested deeper than " + std::to_string(kDeepest) + " (corrupt header)");
        while (until_delimiter || at < end) {
            if (at + 8 > end) fail("an element runs past the end of its sequence or the file (truncated)");
            const unsigned group = u16(at), number = u16(at + 2);
            if (group == 0xfffe) {
                const std::uint32_t length = u32(at + 4);
                if (number == 0xe0dd || number == 0xe00d) {  // sequence or item delimiter
                    if (!until_delimiter) fail("a delimiter where none belongs (corrupt header)");
                    return at + 8;
                }
                if (number != 0xe000 || !items) fail("an item outside a sequence (corrupt header)");
                if (length == kUndefined) {
                    at = walk_items_or_elements(at + 8, size_, depth + 1, false, true);
                } else {
                    if (at + 8 + length > end) fail("an item runs past the end of its sequence or the file (truncated)");
                    walk_items_or_elements(at + 8, at + 8 + length, depth + 1, false);
                    at += 8 + length;
                }
                continue;
            }
            if (items) fail("a sequence holds an element that is not an item (corrupt header)");
            const Element element = element_at(at, explicit_vr_);
            if (element.value_at + element.length > end) fail("an element runs past the end of its sequence (corrupt header)");
            if (group == 0x7fe0 && number == 0x0010 && depth == 0) {
                // The pixel data: native values are checked against the image's size later;
                // encapsulated fragments are walked here.
                result_.has_pixel_data = true;
                result_.encapsulated = element.undefined;
                result_.pixel_offset = element.value_at;
                result_.pixel_length = element.length;
                if (element.undefined) walk_fragments(element.value_at);
                return size_;
            }
            if (depth == 0 && !element.undefined && wanted_.count((group << 16) | number) != 0) keep(at, group, number, element);
            const bool sequence = element.sequence || (!explicit_vr_ && element.undefined);
            if (element.undefined) {
                if (!sequence && !(explicit_vr_ && (bytes_[at + 4] == 'U' && bytes_[at + 5] == 'N'))) {
                    fail("an element of undefined length that is not a sequence (corrupt header)");
                }
                at = walk_items_or_elements(element.value_at, size_, depth + 1, true, true);
            } else {
                if (sequence) walk_items_or_elements(element.value_at, element.value_at + element.length, depth + 1, true);
                at = element.value_at + element.length;
            }
        }
        return at;
    }

    // The value of a top-level element asked for, as text: unsigned shorts (US; under implicit VR,
    // which names no VR, the pixel module's US elements by tag) written in decimal, the rest as stored.
    void keep(std::uint64_t at, unsigned group, unsigned number, const Element& element) {
        if (element.length > 4096) fail("an element of the image's description is " + std::to_string(element.length) + " bytes long (corrupt header)");
        static const std::set<unsigned> kPixelModuleShorts{0x0002, 0x0010, 0x0011, 0x0100, 0x0101, 0x0102, 0x0103};
        const bool unsigned_shorts = explicit_vr_ ? bytes_[at + 4] == 'U' && bytes_[at + 5] == 'S'
                                                  : group == 0x0028 && kPixelModuleShorts.count(number) != 0;
        have(element.value_at + element.length);
        std::string value;
        if (unsigned_shorts) {
            for (std::uint64_t k = 0; k + 2 <= element.length; k += 2) {
                value += (value.empty() ? "" : "\\") + std::to_string(u16(element.value_at + k));
            }
        } else {
            value.assign(reinterpret_cast<const char*>(bytes_.data() + element.value_at), static_cast<std::size_t>(element.length));
        }
        result_.values[(group << 16) | number] = std::move(value);
    }

    void walk_fragments(std::uint64_t at) {
        for (;;) {
            if (at + 8 > size_) fail("the pixel data's fragments run past the end of the file (truncated)");
            const unsigned group = u16(at), number = u16(at + 2);
            const std::uint32_t length = u32(at + 4);
            if (group != 0xfffe || (number != 0xe000 && number != 0xe0dd)) fail("the compressed pixel data is not a list of fragments");
            if (number == 0xe0dd) return;
            if (length == kUndefined || at + 8 + length > size_) fail("a pixel data fragment runs past the end of the file (truncated)");
            at += 8 + length;
        }
    }

    const fs::path& file_;
    std::uint64_t size_;
    std::ifstream stream_;
    std::vector<std::uint8_t> bytes_;
    bool explicit_vr_ = true;
    const std::set<std::uint32_t>& wanted_;
    WalkResult result_;
};

constexpr std::uint32_t tag(std::uint32_t group, std::uint32_t element) { return (group << 16) | element; }

// The elements a slice's description is read from.
const std::set<std::uint32_t>& described_tags() {
    static const std::set<std::uint32_t> tags{
        tag(0x0008, 0x103e), tag(0x0018, 0x0050), tag(0x0018, 0x0080), tag(0x0020, 0x000e), tag(0x0020, 0x0032), tag(0x0020, 0x0037),
        tag(0x0028, 0x0002), tag(0x0028, 0x0008), tag(0x0028, 0x0010), tag(0x0028, 0x0011), tag(0x0028, 0x0030), tag(0x0028, 0x0100),
        tag(0x0028, 0x0101), tag(0x0028, 0x0102), tag(0x0028, 0x0103), tag(0x0028, 0x1052), tag(0x0028, 0x1053)};
    return tags;
}

// Returns nullopt for a DICOM file that holds no image (a DICOMDIR, a structured report). The
// header is read by gridwarp's walk of the elements, not GDCM's parser (which aborts on damage).
std::optional<SliceHeader> read_slice_header(const fs::path& file, std::uint64_t file_size) {
    const WalkResult walk = ElementWalk(file, file_size, described_tags()).run();
    const auto text = [&](std::uint16_t group, std::uint16_t element) {
        const auto found = walk.values.find(tag(group, element));
        return found == walk.values.end() ? std::string() : found->second;
    };
    SliceHeader slice;
    slice.file = file;
    slice.file_size = file_size;
    slice.rows = integer_attribute(text(0x0028, 0x0010), file, "Rows", 0);
    slice.columns = integer_attribute(text(0x0028, 0x0011), file, "Columns", 0);
    if ((slice.rows == 0 && slice.columns == 0) || !walk.has_pixel_data) return std::nullopt;
    if (slice.rows <= 0 || slice.columns <= 0) throw FileError(file, "Rows and Columns must both be positive");
    slice.series_uid = trimmed(text(0x0020, 0x000e));
    if (slice.series_uid.empty()) throw FileError(file, "has no SeriesInstanceUID");
    slice.description = trimmed(text(0x0008, 0x103e));
    slice.transfer_syntax = trimmed(walk.transfer_syntax);
    slice.encapsulated = walk.encapsulated;
    slice.pixel_offset = walk.pixel_offset;
    slice.pixel_length = walk.pixel_length;
    slice.frames = integer_attribute(text(0x0028, 0x0008), file, "NumberOfFrames", 1);
    slice.samples = integer_attribute(text(0x0028, 0x0002), file, "SamplesPerPixel", 1);
    slice.bits_allocated = integer_attribute(text(0x0028, 0x0100), file, "BitsAllocated", 0);
    slice.bits_stored = integer_attribute(text(0x0028, 0x0101), file, "BitsStored", slice.bits_allocated);
    slice.high_bit = integer_attribute(text(0x0028, 0x0102), file, "HighBit", slice.bits_stored - 1);
    slice.pixel_representation = integer_attribute(text(0x0028, 0x0103), file, "PixelRepresentation", 0);
    const auto spacing = decimals(text(0x0028, 0x0030), file, "PixelSpacing", 2);
    slice.pixel_spacing = {spacing[0], spacing[1]};
    const auto orientation = decimals(text(0x0020, 0x0037), file, "ImageOrientationPatient", 6);
    slice.row_direction = {orientation[0], orientation[1], orientation[2]};
    slice.column_direction = {orientation[3], orientation[4], orientation[5]};
    const auto position = decimals(text(0x0020, 0x0032), file, "ImagePositionPatient", 3);
    slice.position = {position[0], position[1], position[2]};
    for (const double value : position) {
        if (!(std::abs(value) < kLargestCoordinate)) throw FileError(file, "ImagePositionPatient needs finite millimetres below 1e10");
    }
    for (const double value : spacing) {
        if (!(value < kLargestCoordinate)) throw FileError(file, "PixelSpacing needs finite millimetres below 1e10");
    }
    if (const std::string thickness = trimmed(text(0x0018, 0x0050)); !thickness.empty()) {
        slice.slice_thickness = decimals(thickness, file, "SliceThickness", 1)[0];
    }
    if (const std::string tr = trimmed(text(0x0018, 0x0080)); !tr.empty()) slice.repetition_time_ms = decimals(tr, file, "RepetitionTime", 1)[0];
    if (const std::string slope = trimmed(text(0x0028, 0x1053)); !slope.empty()) slice.slope = decimals(slope, file, "RescaleSlope", 1)[0];
    if (const std::string inter = trimmed(text(0x0028, 0x1052)); !inter.empty()) slice.intercept = decimals(inter, file, "RescaleIntercept", 1)[0];
    return slice;
}

// The regular files directly in `folder`. A symbolic link is followed only where it stays inside
// the folder; anything else that is not a regular file (a FIFO would block, a device never end)
// is refused, as every input file is.
std::vector<std::pair<fs::path, std::uint64_t>> folder_files(const fs::path& input, const fs::path& folder) {
    std::error_code error;
    const fs::path real_folder = fs::canonical(folder, error);
    if (error) throw FileError(input, "cannot open the folder: " + error.message());
    std::vector<std::pair<fs::path, std::uint64_t>> files;
    for (fs::directory_iterator entry(folder, error), end; !error && entry != end; entry.increment(error)) {
        const fs::path path = entry->path();
        const auto link_status = fs::symlink_status(path, error);
        if (error) break;
        if (fs::is_directory(link_status)) continue;  // one folder, one series: subfolders are not searched
        if (fs::is_symlink(link_status)) {
            const fs::path target = fs::weakly_canonical(path, error);
            if (error || target.parent_path() != real_folder) {
                throw FileError(input, "its file " + path.filename().string() + " is a symbolic link leading outside the folder");
            }
            if (fs::is_directory(fs::status(path, error))) continue;
        }
        const auto status = fs::status(path, error);
        if (error || !fs::is_regular_file(status)) {
            throw FileError(input, "its file " + path.filename().string() + " is not a regular file (a device, FIFO or socket)");
        }
        files.emplace_back(path, fs::file_size(path, error));
        if (error) break;
    }
    if (error) throw FileError(input, "cannot list the folder: " + error.message());
    std::sort(files.begin(), files.end());
    return files;
}

// The code of the axes' nearest directions, LPS world, in nibabel's letters (each axis names the
// way it points to): "LPS" for an ordinary axial series; "oblique" is added where an axis is off.
std::string orientation_code(const Vector3& row, const Vector3& column) {
    const Vector3 normal = cross(row, column);
    static constexpr std::array<std::array<char, 2>, 3> letters{{{'L', 'R'}, {'P', 'A'}, {'S', 'I'}}};
    std::string code;
    bool oblique = false;
    for (const Vector3& axis : {row, column, normal}) {
        std::size_t largest = 0;
        for (std::size_t i = 1; i < 3; ++i) {
            if (std::abs(axis[i]) > std::abs(axis[largest])) largest = i;
        }
        code += letters[largest][axis[largest] < 0 ? 1 : 0];
        oblique = oblique || std::abs(axis[largest]) < 0.9999;
    }
    return oblique ? code + " (oblique)" : code;
}

std::string listing_text(const std::vector<DicomSeriesSummary>& listing) {
    std::string text;
    for (const DicomSeriesSummary& series : listing) {
        if (!text.empty()) text += "; ";
        text += series.uid + " '" + series.description + "' " + std::to_string(series.columns) + "x" + std::to_string(series.rows) + "x" +
                std::to_string(series.slices) + " " + series.orientation;
    }
    return text;
}

DType stored_dtype(const SliceHeader& slice) {
    const bool is_signed = slice.pixel_representation == 1;
    switch (slice.bits_allocated) {
        case 8: return is_signed ? DType::Int8 : DType::UInt8;
        case 16: return is_signed ? DType::Int16 : DType::UInt16;
        case 32: return is_signed ? DType::Int32 : DType::UInt32;
        default:
            throw FileError(slice.file, "BitsAllocated is " + std::to_string(slice.bits_allocated) + ": gridwarp reads 8, 16 and 32");
    }
}

// Uncompressed little-endian pixels whose bits gridwarp can place itself (the high bit the top
// stored bit) are read straight from the file; anything else is GDCM's to decode.
bool reads_pixels_itself(const SliceHeader& slice) {
    const bool little_endian = slice.transfer_syntax == "1.2.840.10008.1.2" || slice.transfer_syntax == "1.2.840.10008.1.2.1";
    return little_endian && !slice.encapsulated && slice.bits_stored >= 1 && slice.bits_stored <= slice.bits_allocated &&
           slice.high_bit == slice.bits_stored - 1;
}

// Values of fewer stored bits than allocated: the bits above are not part of the value (DICOM
// PS3.5 8.1.1): masked off, or for signed pixels filled with the sign bit.
template <class T>
void place_stored_bits(T* values, std::size_t count, int bits_stored, bool is_signed) {
    using Unsigned = std::make_unsigned_t<T>;
    constexpr int bits = 8 * sizeof(T);
    if (bits_stored >= bits) return;
    const Unsigned mask = static_cast<Unsigned>((Unsigned{1} << bits_stored) - 1);
    const Unsigned sign = static_cast<Unsigned>(Unsigned{1} << (bits_stored - 1));
    for (std::size_t i = 0; i < count; ++i) {
        Unsigned value = static_cast<Unsigned>(values[i]) & mask;
        if (is_signed && (value & sign)) value |= static_cast<Unsigned>(~mask);
        values[i] = static_cast<T>(value);
    }
}

void read_native_pixels(const SliceHeader& slice, std::uint64_t slice_bytes, char* destination) {
    if (slice.pixel_length < slice_bytes) {
        throw FileError(slice.file, "its pixel data holds " + std::to_string(slice.pixel_length) + " bytes, " + std::to_string(slice_bytes) +
                                        " expected (truncated)");
    }
    std::ifstream stream(slice.file, std::ios::binary);
    stream.seekg(static_cast<std::streamoff>(slice.pixel_offset));
    if (!stream.read(destination, static_cast<std::streamsize>(slice_bytes))) throw FileError(slice.file, "cannot read its pixel data");
    const auto count = static_cast<std::size_t>(slice_bytes * 8 / static_cast<std::uint64_t>(slice.bits_allocated));
    const bool is_signed = slice.pixel_representation == 1;
    const int stored = static_cast<int>(slice.bits_stored);
    switch (slice.bits_allocated) {
        case 8: place_stored_bits(reinterpret_cast<std::uint8_t*>(destination), count, stored, is_signed); break;
        case 16: place_stored_bits(reinterpret_cast<std::uint16_t*>(destination), count, stored, is_signed); break;
        default: place_stored_bits(reinterpret_cast<std::uint32_t*>(destination), count, stored, is_signed); break;
    }
}

void decode_pixels_with_gdcm(const SliceHeader& slice, std::uint64_t slice_bytes, char* destination) {
    if (!slice.encapsulated && slice.pixel_length < slice_bytes) {
        // GDCM copies the slice's size from whatever the element holds: a short element would be read past.
        throw FileError(slice.file, "its pixel data holds " + std::to_string(slice.pixel_length) + " bytes, " + std::to_string(slice_bytes) +
                                        " expected (truncated)");
    }
    throw_if_failed(itk_backend().decode_dicom_pixels(slice.file, slice.transfer_syntax, slice_bytes, destination));
}

bool within(double a, double b, double tolerance) { return std::abs(a - b) <= tolerance; }

// The checks that make the slices one regular grid; each refusal is one line naming the input.
void require_one_grid(const fs::path& input, const std::vector<SliceHeader>& slices) {
    const SliceHeader& first = slices.front();
    if (first.frames != 1) {
        throw FileError(first.file, "holds " + std::to_string(first.frames) + " frames: multi-frame (enhanced) DICOM is not read");
    }
    if (first.samples != 1) {
        throw FileError(first.file, "has " + std::to_string(first.samples) + " samples per pixel: gridwarp reads grey-level DICOM only");
    }
    for (const SliceHeader& slice : slices) {
        if (slice.rows != first.rows || slice.columns != first.columns) {
            throw FileError(input, "the series mixes slice sizes: " + first.file.filename().string() + " is " + std::to_string(first.columns) +
                                       "x" + std::to_string(first.rows) + ", " + slice.file.filename().string() + " is " +
                                       std::to_string(slice.columns) + "x" + std::to_string(slice.rows));
        }
        for (std::size_t i = 0; i < 3; ++i) {
            if (!within(slice.row_direction[i], first.row_direction[i], 1e-4) || !within(slice.column_direction[i], first.column_direction[i], 1e-4)) {
                throw FileError(input, "the series mixes orientations: " + first.file.filename().string() + " and " +
                                           slice.file.filename().string() + " differ in ImageOrientationPatient");
            }
        }
        for (std::size_t i = 0; i < 2; ++i) {
            if (!within(slice.pixel_spacing[i], first.pixel_spacing[i], 1e-6)) {
                throw FileError(input, "the series mixes pixel spacings: " + first.file.filename().string() + " and " +
                                           slice.file.filename().string() + " differ in PixelSpacing");
            }
        }
        if (slice.bits_allocated != first.bits_allocated || slice.pixel_representation != first.pixel_representation ||
            slice.frames != 1 || slice.samples != 1) {
            throw FileError(input, "the series mixes pixel types: " + first.file.filename().string() + " and " + slice.file.filename().string());
        }
        if (slice.slope != first.slope || slice.intercept != first.intercept) {
            throw FileError(input, "the series mixes RescaleSlope/RescaleIntercept: " + first.file.filename().string() + " and " +
                                       slice.file.filename().string());
        }
    }
    const Vector3 &row = first.row_direction, &column = first.column_direction;
    if (!within(dot(row, row), 1.0, 1e-3) || !within(dot(column, column), 1.0, 1e-3) || !within(dot(row, column), 0.0, 1e-3)) {
        throw FileError(first.file, "ImageOrientationPatient is not two perpendicular unit vectors");
    }
    if (!(first.pixel_spacing[0] > 0.0) || !(first.pixel_spacing[1] > 0.0)) throw FileError(first.file, "PixelSpacing must be positive");
}

using SeriesSlices = std::map<std::string, std::vector<SliceHeader>>;

// Every DICOM image file's header in FOLDER, grouped by series. The named file (one of the
// folder's: its name identifies it) must be a DICOM file.
SeriesSlices collect_series(const fs::path& input, const fs::path& folder, const fs::path& named_file) {
    SeriesSlices series;
    for (const auto& [file, size] : folder_files(input, folder)) {
        if (size < 132 || !has_dicom_preamble(file)) {
            if (!named_file.empty() && file.filename() == named_file.filename()) throw FileError(input, "not a DICOM file (no DICM preamble)");
            continue;
        }
        if (std::optional<SliceHeader> slice = read_slice_header(file, size)) series[slice->series_uid].push_back(std::move(*slice));
    }
    if (series.empty()) throw FileError(input, "holds no DICOM image files");
    return series;
}

std::vector<DicomSeriesSummary> summaries_of(const SeriesSlices& series) {
    std::vector<DicomSeriesSummary> listing;
    for (const auto& [uid, slices] : series) {
        const SliceHeader& first = slices.front();
        listing.push_back({uid, first.description, first.columns, first.rows, static_cast<std::int64_t>(slices.size()),
                           orientation_code(first.row_direction, first.column_direction)});
    }
    return listing;
}

}  // namespace

std::vector<DicomSeriesSummary> list_series_in_folder(const fs::path& input, const fs::path& folder) {
    return summaries_of(collect_series(input, folder, {}));
}

Image read_series_in_folder(const fs::path& input, const fs::path& folder, const std::string& series_uid, const fs::path& named_file,
                            const MemoryBudget& budget, bool with_pixels) {
    SeriesSlices series = collect_series(input, folder, named_file);
    const auto is_named = [&](const fs::path& file) { return !named_file.empty() && file.filename() == named_file.filename(); };
    const std::vector<DicomSeriesSummary> listing = summaries_of(series);
    std::string chosen = series_uid;
    if (chosen.empty() && !named_file.empty()) {
        for (const auto& [uid, slices] : series) {
            if (std::any_of(slices.begin(), slices.end(), [&](const SliceHeader& s) { return is_named(s.file); })) chosen = uid;
        }
    }
    if (chosen.empty()) {
        if (series.size() > 1) {
            throw FileError(input, "holds " + std::to_string(series.size()) + " series; name one with " + folder.string() +
                                       ",series=UID: " + listing_text(listing));
        }
        chosen = series.begin()->first;
    }
    const auto found = series.find(chosen);
    if (found == series.end()) throw FileError(input, "holds no series " + chosen + " (it holds: " + listing_text(listing) + ")");
    std::vector<SliceHeader>& slices = found->second;
    require_one_grid(input, slices);

    // Slices stacked along the normal of their plane, spacing from their positions (SliceThickness
    // is the slab's thickness, which need not be the distance between slices).
    const SliceHeader& first = slices.front();
    const Vector3 normal = cross(first.row_direction, first.column_direction);
    std::sort(slices.begin(), slices.end(),
              [&](const SliceHeader& a, const SliceHeader& b) { return dot(a.position, normal) < dot(b.position, normal); });
    // One slice: its thickness, as dcm2niix takes it (1 mm where absent).
    double slice_spacing = first.slice_thickness > 0.0 ? first.slice_thickness : 1.0;
    if (slices.size() > 1) {
        const double extent = dot(slices.back().position, normal) - dot(slices.front().position, normal);
        std::vector<double> steps;
        for (std::size_t k = 1; k < slices.size(); ++k) steps.push_back(dot(slices[k].position, normal) - dot(slices[k - 1].position, normal));
        const double smallest = *std::min_element(steps.begin(), steps.end());
        if (smallest < 1e-3) {
            throw FileError(input, "several slices lie at one position (" + slices.front().file.filename().string() +
                                       "...): echoes, phases or a repeated acquisition are not one volume");
        }
        slice_spacing = extent / static_cast<double>(slices.size() - 1);
        const double tolerance = std::max(1e-3, 1e-3 * slice_spacing);
        // Gaps first: a missing slice also makes the spacing uneven, and is the better diagnosis.
        for (std::size_t k = 0; k < steps.size(); ++k) {
            if (steps[k] > 1.5 * smallest) {
                throw FileError(input, "a slice is missing between " + slices[k].file.filename().string() + " and " +
                                           slices[k + 1].file.filename().string() + " (" + std::to_string(steps[k]) + " mm apart, others " +
                                           std::to_string(smallest) + " mm)");
            }
        }
        for (std::size_t k = 0; k < steps.size(); ++k) {
            if (!within(steps[k], slice_spacing, tolerance)) {
                throw FileError(input, "uneven slice spacing: " + std::to_string(steps[k]) + " mm between " +
                                           slices[k].file.filename().string() + " and " + slices[k + 1].file.filename().string() +
                                           ", " + std::to_string(slice_spacing) + " mm on average");
            }
        }
        // Each position must lie on the line through the first along the normal (a gantry tilt
        // shears the stack, which one grid cannot describe).
        for (std::size_t k = 0; k < slices.size(); ++k) {
            const double along = dot(slices[k].position, normal) - dot(slices.front().position, normal);
            for (std::size_t i = 0; i < 3; ++i) {
                if (!within(slices[k].position[i], slices.front().position[i] + along * normal[i], tolerance)) {
                    throw FileError(input, "the slices are not stacked along their normal (a gantry tilt?): " +
                                               slices[k].file.filename().string() + " is offset within its plane");
                }
            }
        }
    }

    const SliceHeader& lowest = slices.front();
    const DType stored = stored_dtype(lowest);
    const bool scaled = lowest.slope != 1.0 || lowest.intercept != 0.0;
    Image image;
    image.kind = FileKind::Volume;
    image.format = "dicom";
    image.batch = 1;
    image.channels = 1;
    image.layout = ChannelLayout::Interleaved;
    image.spatial = {static_cast<std::int64_t>(slices.size()), lowest.rows, lowest.columns};
    Geometry geometry;
    geometry.spacing = {lowest.pixel_spacing[1], lowest.pixel_spacing[0], slice_spacing};
    geometry.origin = {lowest.position[0], lowest.position[1], lowest.position[2]};
    geometry.direction.assign(9, 0.0);
    const std::array<Vector3, 3> axes{lowest.row_direction, lowest.column_direction, normal};
    for (std::size_t j = 0; j < 3; ++j) {
        for (std::size_t i = 0; i < 3; ++i) geometry.direction[i * 3 + j] = axes[j][i];
    }
    image.geometry = geometry;
    if (lowest.repetition_time_ms > 0.0 && std::isfinite(lowest.repetition_time_ms)) image.repetition_time = lowest.repetition_time_ms / 1000.0;
    if (scaled) image.scaling = ValueScaling{stored, lowest.slope, lowest.intercept};
    const DType value_type = scaled ? DType::Float64 : stored;
    if (!with_pixels) {
        image.pixels = Tensor(value_type, Shape(image.storage_shape().size(), 0));
        return image;
    }

    // Sizes checked against the budget before any pixel data is read: the volume, and each file
    // (GDCM holds a file's pixel data whole while it decodes it).
    const auto slice_values = static_cast<std::uint64_t>(lowest.rows) * static_cast<std::uint64_t>(lowest.columns);
    // A rescaled series may hold its stored values and the float64 values at once.
    check_memory_budget(input, "reading " + std::to_string(slice_values * slices.size()) + " DICOM values",
                        slice_values * slices.size(), dtype_size(value_type) + (scaled ? dtype_size(stored) : 0), budget);
    const std::uint64_t slice_bytes = slice_values * dtype_size(stored);
    for (const SliceHeader& slice : slices) {
        check_memory_budget(slice.file, "reading a DICOM file of " + std::to_string(slice.file_size) + " bytes", slice.file_size, 1, budget);
        if (!slice.encapsulated && slice.file_size < slice_bytes) {
            throw FileError(slice.file, "is " + std::to_string(slice.file_size) + " bytes, too small for its " + std::to_string(slice_bytes) +
                                            " bytes of pixels (truncated)");
        }
    }

    Tensor stored_pixels(stored, image.storage_shape());
    auto* destination = static_cast<char*>(stored_pixels.data());
    for (const SliceHeader& slice : slices) {
        if (reads_pixels_itself(slice)) {
            read_native_pixels(slice, slice_bytes, destination);
        } else {
            decode_pixels_with_gdcm(slice, slice_bytes, destination);
        }
        destination += slice_bytes;
    }
    // The stored values: the caller applies the scaling (apply_value_scaling) where it wants values.
    image.pixels = std::move(stored_pixels);
    if (scaled) image.scaling->pixels_are_stored = true;
    return image;
}

}  // namespace gridwarp::io::detail
