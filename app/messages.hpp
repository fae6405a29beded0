// What commands print: messages on the original stderr, the progress bar, --explain, and the text of
// messages (sizes x first, control characters written out).
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli_common.hpp"
#include "gridwarp/grid_sample.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::cli {

// File descriptor 2 as it was when gridwarp started (main takes it first). lib/io points descriptor
// 2 at a capture file while a decoder runs, so whatever another thread writes there meanwhile would
// become that decoder's error: the log, progress bars and batch's lines are written here instead.
int original_stderr();
// Writes all of `text` to original_stderr(), in one write where the system allows (lines that
// threads write at once do not interleave).
void write_to_original_stderr(std::string_view text);

// On a terminal, a command running longer than about a second shows on stderr which of its phases
// (reading, sampling, writing) it is in, as a bar with the elapsed time, redrawn until it ends.
// Off with --quiet, when stderr is not a terminal, and inside gridwarp batch (whose jobs are quiet).
// GRIDWARP_PROGRESS_AFTER_MS sets the delay (default 1000).
class CommandProgress {
public:
    CommandProgress(const std::string& command, const CommonOptions& options);
    ~CommandProgress();
    CommandProgress(const CommandProgress&) = delete;
    CommandProgress& operator=(const CommandProgress&) = delete;
    // Phase `index` of `count` (0-based) begins.
    void phase(const char* name, int index, int count);
    // Within the phase: `done` of `total` items (tiles) finished, shown after its name.
    void items(std::int64_t done, std::int64_t total);
    // Stops drawing and clears the line (the destructor does it too).
    void finish();

private:
    void draw_locked();
    void write_to_terminal(const std::string& text) const;
    void run();

    std::string command_;
    bool active_ = false;
    // original_stderr() when drawing: the bar must not land in a decoder's captured messages.
    int terminal_ = -1;
    std::chrono::steady_clock::time_point start_;
    std::chrono::milliseconds delay_{1000};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false, drawn_ = false;
    std::string phase_ = "starting";
    int index_ = 0, count_ = 1;
    std::int64_t items_done_ = 0, items_total_ = 0;
    std::thread thread_;
};

// Logs what a reader wanted the user to know (a NIfTI file without orientation, ...).
void report_warnings(const io::Image& image);

// An image's size as every message gives it, x first: "320 x 240 (W x H)", "64 x 64 x 48 (W x H x D)".
using io::image_size_text;
// One warning line when `image` is an integer image that looks like a label map (few distinct
// values, most voxels equal to their neighbour) and `options` interpolate between values
// (label_map_warning.cpp).
void warn_if_label_map(const std::filesystem::path& file, const io::Image& image, const SampleOptions& options);

// --explain: what a job would read, how it maps output points to input points, how it samples and
// what it would write, printed on stdout instead of doing it.
class Explanation {
public:
    explicit Explanation(std::string command) : command_(std::move(command)) {}
    void add(const std::string& key, const std::string& value) { lines_.emplace_back(key, value); }
    void print() const;

private:
    std::string command_;
    std::vector<std::pair<std::string, std::string>> lines_;
};
std::string describe_image(const io::Image& image);     // "volume int16, 1 channel(s), spatial (D, H, W)"
std::string describe_geometry(const io::Geometry& geometry);
std::string describe_rows(const std::vector<double>& values, std::size_t rows, std::size_t columns);  // "[[a, b], [c, d]]"

// `text` with its control characters written out (\n, \t, \xHH), so that a message naming a file
// whose name holds a newline is still one line.
std::string escape_control_characters(std::string_view text);

// A command's way of ending with an exit status other than 0 or 1 (batch: 2 and 3); an empty
// message prints nothing.
class ExitStatus : public std::runtime_error {
public:
    ExitStatus(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

}  // namespace gridwarp::cli
