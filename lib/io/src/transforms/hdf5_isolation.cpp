#include "transforms/hdf5_isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "files/file_checks.hpp"
#include "formats/read_guards.hpp"
#include "gridwarp/io/error.hpp"
#include "modules/backends.hpp"
#include "transforms/transform_wire.hpp"

extern char** environ;

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

namespace {

class Pipe {
public:
    Pipe() {
        if (::pipe2(ends_, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    }
    ~Pipe() {
        close_read();
        close_write();
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    int read_end() const { return ends_[0]; }
    int write_end() const { return ends_[1]; }
    void close_read() { close_end(0); }
    void close_write() { close_end(1); }

private:
    void close_end(int which) {
        if (ends_[which] >= 0) ::close(ends_[which]);
        ends_[which] = -1;
    }
    int ends_[2] = {-1, -1};
};

struct ReaderRun {
    std::string out, err;
    int status = 0;
    bool output_too_large = false;
};

// Reads the program's stdout (up to `most_output` bytes) and stderr (its first 64 KiB) until both
// close, then reaps it.
ReaderRun run_reader(const fs::path& program, const std::vector<std::string>& arguments, std::uint64_t most_output) {
    Pipe out, err;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out.write_end(), 1);
    posix_spawn_file_actions_adddup2(&actions, err.write_end(), 2);
    std::vector<char*> argv;
    std::string program_name = program.string();
    argv.push_back(program_name.data());
    std::vector<std::string> owned = arguments;
    for (std::string& argument : owned) argv.push_back(argument.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) throw std::system_error(spawned, std::generic_category(), "cannot start " + program.string());
    out.close_write();
    err.close_write();

    ReaderRun run;
    pollfd streams[2] = {{out.read_end(), POLLIN, 0}, {err.read_end(), POLLIN, 0}};
    char buffer[1 << 16];
    while (streams[0].fd >= 0 || streams[1].fd >= 0) {
        if (::poll(streams, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int s = 0; s < 2; ++s) {
            if (streams[s].fd < 0 || streams[s].revents == 0) continue;
            const ssize_t got = ::read(streams[s].fd, buffer, sizeof buffer);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                streams[s].fd = -1;
                continue;
            }
            std::string& sink = s == 0 ? run.out : run.err;
            const std::uint64_t most = s == 0 ? most_output : 65536;
            if (sink.size() + static_cast<std::uint64_t>(got) > most) {
                if (s == 0 && !run.output_too_large) {
                    run.output_too_large = true;
                    ::kill(pid, SIGKILL);
                }
                continue;
            }
            sink.append(buffer, static_cast<std::size_t>(got));
        }
    }
    while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
    }
    return run;
}

}  // namespace

TransformFile read_hdf5_transform(const fs::path& file, std::size_t dimension, const ReadOptions& options) {
    require_readable_file(file);  // a FIFO would block the reader for its whole time limit
    const fs::path program = find_module_file(kHdf5ReaderProgram);
    // What it may hand back: the fields the budget lets it read (their vectors as float64), and
    // room for the affine steps; unbounded with the budget.
    const std::uint64_t budget = options.memory.max_bytes;
    const std::uint64_t most_output = budget == 0 ? UINT64_MAX : budget + (std::uint64_t{64} << 20);
    const ReaderRun run = run_reader(program, {fs::absolute(file).string(), std::to_string(dimension), std::to_string(budget)}, most_output);
    if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0 && !run.output_too_large) {
        return decode_transform_file(run.out, dimension, file);
    }
    if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == kHdf5ReaderRefused) {
        const std::string message = first_message_line(run.err);
        throw FileError(file, message.empty() ? "the HDF5 reader refused the file without a reason" : message);
    }
    if (run.output_too_large) throw FileError(file, "the HDF5 reader handed back more than the memory budget (--max-memory)");
    if (WIFSIGNALED(run.status)) {
        const int signal = WTERMSIG(run.status);
        if (signal == SIGXCPU || signal == SIGALRM) {
            throw FileError(file, "HDF5 took more than " + std::to_string(kHdf5ReaderSeconds) + " s on it: a damaged or hostile file");
        }
        throw FileError(file, std::string("HDF5 crashed on it (") + ::strsignal(signal) + "): a damaged or hostile file");
    }
    const std::string message = first_message_line(run.err);
    throw FileError(file, "the HDF5 reader failed" + (message.empty() ? std::string() : ": " + message));
}

}  // namespace gridwarp::io::detail
