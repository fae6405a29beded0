// NumPy .npy files: every dtype gridwarp knows, format versions 1.0, 2.0 and 3.0, little and
// big endian, C and Fortran order. Strings are NumPy's fixed-width unicode ('<U') or bytes ('S');
// bfloat16 is written with the descr '<V2' (how ml_dtypes arrays are saved: NumPy has no bfloat16
// of its own) and read from '<V2', '|V2' or 'bfloat16'.
// See docs/formats.md.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "gridwarp/tensor.hpp"

namespace gridwarp::io {

namespace detail {
class StagedOutput;
}

// Parses the bytes of a .npy file; `source` names it in errors. Throws FileError for anything
// malformed, for shapes of more than 32 dimensions (NumPy 1.x's limit), and for shapes whose data
// the bytes do not hold (checked before allocating).
Tensor parse_npy(std::string_view bytes, const std::filesystem::path& source);
Tensor read_npy(const std::filesystem::path& file);

// Encodes a tensor as .npy (version 1.0, or 2.0 when the header needs it; little endian, C order;
// strings as '<U' with the longest string's length in code points).
std::string encode_npy(const ConstTensorView& tensor);
// Writes atomically (see atomic_file.hpp).
void write_npy(const std::filesystem::path& file, const ConstTensorView& tensor);

// A .npy output computed in place: tensor() is the data of a staged file of its final size, mapped
// into memory (a buffer where the file system cannot reserve or map it); commit() publishes the
// file atomically. Destroyed uncommitted, it leaves nothing behind. Strings are not mapped.
class PendingNpy {
public:
    PendingNpy(std::filesystem::path target, DType dtype, const Shape& shape);
    ~PendingNpy();
    PendingNpy(const PendingNpy&) = delete;
    PendingNpy& operator=(const PendingNpy&) = delete;

    TensorView tensor() { return tensor_.view(); }
    void commit();

private:
    std::filesystem::path target_;
    Tensor tensor_;
    std::unique_ptr<detail::StagedOutput> staged_;  // while tensor_ is a mapped file
    bool committed_ = false;
};

}  // namespace gridwarp::io
