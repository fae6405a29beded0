// What commands print: the original stderr, the progress bar, --explain and message text.
#include "messages.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace gridwarp::cli {

int original_stderr() {
    // Above 2, and not inherited by programs the process may start.
    static const int descriptor = [] {
        const int copy = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
        return copy >= 0 ? copy : 2;
    }();
    return descriptor;
}

void write_to_original_stderr(std::string_view text) {
    const int descriptor = original_stderr();
    while (!text.empty()) {
        const ssize_t n = ::write(descriptor, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

CommandProgress::CommandProgress(const std::string& command, const CommonOptions& options)
    : command_(command), active_(!options.quiet && ::isatty(original_stderr())), start_(std::chrono::steady_clock::now()) {
    if (const char* after = std::getenv("GRIDWARP_PROGRESS_AFTER_MS"); after && *after) delay_ = std::chrono::milliseconds(std::atoi(after));
    if (active_) terminal_ = original_stderr();
    if (terminal_ >= 0) thread_ = std::thread([this] { run(); });
}

CommandProgress::~CommandProgress() { finish(); }

void CommandProgress::finish() {
    if (!active_) return;
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (drawn_) write_to_terminal("\r\033[K");  // the line goes; the command's own messages follow
    active_ = false;
    terminal_ = -1;
}

void CommandProgress::phase(const char* name, int index, int count) {
    if (!active_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    phase_ = name;
    index_ = index;
    count_ = std::max(1, count);
    items_done_ = items_total_ = 0;
    if (std::chrono::steady_clock::now() - start_ >= delay_) draw_locked();
}

void CommandProgress::items(std::int64_t done, std::int64_t total) {
    if (!active_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    items_done_ = done;
    items_total_ = total;
}

void CommandProgress::draw_locked() {
    constexpr int kWidth = 20;
    const int filled = kWidth * index_ / count_;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char line[160];
    const std::string items = items_total_ > 0 ? " " + std::to_string(items_done_) + "/" + std::to_string(items_total_) + " tiles" : "";
    std::snprintf(line, sizeof line, "\rgridwarp %s: [%s%s] %s%s (%d/%d)  %.1f s ", command_.c_str(),
                  std::string(static_cast<std::size_t>(filled), '#').c_str(), std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
                  phase_.c_str(), items.c_str(), index_ + 1, count_, seconds);
    write_to_terminal(line);
    drawn_ = true;
}

void CommandProgress::write_to_terminal(const std::string& text) const {
    if (terminal_ >= 0) write_to_original_stderr(text);
}

void CommandProgress::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wake_.wait_for(lock, delay_, [this] { return stop_; })) return;
    while (!stop_) {
        draw_locked();
        wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
    }
}

void Explanation::print() const {
    // In one piece: the explanations of jobs that gridwarp batch runs side by side do not interleave.
    std::string text = command_ + ":\n";
    for (const auto& [key, value] : lines_) text += "  " + key + ": " + value + "\n";
    std::cout << text << std::flush;
}

std::string describe_image(const io::Image& image) {
    return std::string(io::file_kind_name(image.kind)) + " " + std::string(dtype_name(image.dtype())) + ", " +
           std::to_string(image.channels) + " channel(s), size " + image_size_text(image.spatial);
}

std::string describe_rows(const std::vector<double>& values, std::size_t rows, std::size_t columns) {
    std::ostringstream out;
    out.precision(10);
    out << "[";
    for (std::size_t r = 0; r < rows; ++r) {
        out << (r ? ", [" : "[");
        for (std::size_t c = 0; c < columns; ++c) out << (c ? ", " : "") << values[r * columns + c] + 0.0;
        out << "]";
    }
    out << "]";
    return out.str();
}

std::string describe_geometry(const io::Geometry& geometry) {
    const std::size_t d = geometry.dimension();
    const std::string spacing = describe_rows(geometry.spacing, 1, d), origin = describe_rows(geometry.origin, 1, d);
    return "spacing " + spacing.substr(1, spacing.size() - 2) + " mm, origin " + origin.substr(1, origin.size() - 2) +
           " mm (LPS), direction " + describe_rows(geometry.direction, d, d);
}

void report_warnings(const io::Image& image) {
    for (const auto& warning : image.warnings) spdlog::warn("{}", warning);
}

std::string escape_control_characters(std::string_view text) {
    std::string escaped;
    escaped.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\n') {
            escaped += "\\n";
        } else if (c == '\t') {
            escaped += "\\t";
        } else if (byte < 0x20 || byte == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", byte);
            escaped += hex;
        } else {
            escaped += c;
        }
    }
    return escaped;
}

}  // namespace gridwarp::cli
