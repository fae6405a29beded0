// Internal: the guarded entry points to third-party decoders and writers (read_guards.cpp).
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The guarded entry points (read_guards.cpp): the header checked against the file, then the
// decoder run with its stderr captured; anything it prints fails the read.
Image read_itk_volume(const std::filesystem::path& file, const ReadOptions& options, bool with_pixels);
Image read_raster_checked(const std::filesystem::path& file, const ReadOptions& options);
// Runs `decode` with file descriptor 2 pointed at a temporary file; returns what was written there.
std::string capture_stderr(const std::function<void()>& decode);
// Runs a third-party writer (ITK, OpenCV) of `staged` with its stderr captured: anything it
// prints (a MetaIO complaint) fails the write with that line. When the storage is the cause (the
// errno its failing call left is ENOSPC, EDQUOT, EROFS, EIO or EFBIG, or the file system is full or
// read-only afterwards), the error says so instead.
void write_reporting_failures(const StagedFile& staged, const std::function<void()>& write);
// The first non-empty line of a decoder's messages, shortened.
std::string first_message_line(const std::string& text);

}  // namespace gridwarp::io::detail
