#include "support/fixture_npy.hpp"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace gridwarp::test {

namespace {

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& why) {
    throw std::runtime_error(file.string() + ": " + why);
}

DType fixture_dtype(const std::string& descr, const std::filesystem::path& file) {
    if (descr == "<f4") return DType::Float32;
    if (descr == "<f8") return DType::Float64;
    if (descr == "<i8") return DType::Int64;
    refuse(file, "fixture dtype '" + descr + "' is not one the test reader knows");
}

}  // namespace

std::string read_whole_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) refuse(file, "cannot open");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

Tensor read_fixture_npy(const std::filesystem::path& file) {
    const std::string bytes = read_whole_file(file);
    constexpr std::size_t kPreamble = 10;  // magic (6), version (2), header length (2)
    if (bytes.size() < kPreamble || bytes.compare(0, 6, "\x93NUMPY") != 0 || bytes[6] != 1) refuse(file, "not a version 1.0 .npy file");
    const std::size_t header_length = static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    if (bytes.size() < kPreamble + header_length) refuse(file, "truncated header");
    const std::string header = bytes.substr(kPreamble, header_length);

    std::smatch match;
    if (!std::regex_search(header, match, std::regex("'descr':\\s*'([^']*)'"))) refuse(file, "no descr");
    const DType dtype = fixture_dtype(match[1].str(), file);
    if (!std::regex_search(header, std::regex("'fortran_order':\\s*False"))) refuse(file, "not C order");
    if (!std::regex_search(header, match, std::regex("'shape':\\s*\\(([^)]*)\\)"))) refuse(file, "no shape");
    Shape shape;
    const std::string dims = match[1].str();
    const std::regex digits("\\d+");
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), digits); it != std::sregex_iterator(); ++it) {
        shape.push_back(std::stoll(it->str()));
    }

    Tensor tensor(dtype, shape);
    if (bytes.size() != kPreamble + header_length + tensor.nbytes()) refuse(file, "data size does not match the shape");
    if (tensor.nbytes() > 0) std::memcpy(tensor.data(), bytes.data() + kPreamble + header_length, tensor.nbytes());
    return tensor;
}

}  // namespace gridwarp::test
