// Internal: staging for atomic writes (atomic_file.cpp implements it; atomic_file.hpp gives the rules).
#pragma once

#include <filesystem>

#include "gridwarp/io/atomic_file.hpp"

namespace gridwarp::io::detail {

// Staging for atomic writes (atomic_file.cpp): where the writer makes target's file (beside target,
// or in a fresh folder beside it for formats that may write companion files), the move of what was
// written into target's folder (companion files first, the named file last), and its removal.
struct Staging {
    std::filesystem::path file;
    std::filesystem::path folder;  // empty: the file is staged alone
};
Staging make_staging(const std::filesystem::path& target);
void publish_staged(const Staging& staging, const std::filesystem::path& target);
void discard_staged(const Staging& staging) noexcept;

}  // namespace gridwarp::io::detail
