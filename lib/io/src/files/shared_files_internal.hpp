// Internal: the store behind shared_files.hpp, for the readers that use it.
#pragma once

#include <any>
#include <filesystem>
#include <optional>
#include <string>

namespace gridwarp::io::detail {

// The key of `file` read as `what` (the reader and its options), or nullopt when sharing is off or
// the file cannot be looked at (the reader then reads it and reports the problem itself).
std::optional<std::string> shared_file_key(const std::filesystem::path& file, const std::string& what);
std::optional<std::any> shared_file_find(const std::string& key);
// Keeps `value` (a copyable result whose buffers are shared) unless it alone exceeds the budget;
// least recently used entries make room.
void shared_file_store(const std::string& key, std::any value, std::size_t bytes);

}  // namespace gridwarp::io::detail
