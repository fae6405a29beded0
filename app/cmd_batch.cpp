// gridwarp batch: one command (affine, flow, resample, sample) over the rows of a manifest, in one
// process, several jobs at a time. Each job is the single command run in-process with the options
// its row and the command line give, so its output is the single command's, byte for byte.
#include <malloc.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "batch_manifest.hpp"
#include "cli_common.hpp"
#include "file_options.hpp"
#include "messages.hpp"
#include "geometry_options.hpp"
#include "command_runner.hpp"
#include "gridwarp/io/atomic_file.hpp"
#include "gridwarp/io/file_identity.hpp"
#include "gridwarp/io/image.hpp"
#include "gridwarp/io/shared_files.hpp"

namespace gridwarp::cli {

namespace {

namespace fs = std::filesystem;

struct BatchCommand {
    std::string command;
    fs::path manifest;
    int jobs = 0;
    fs::path report;
    bool resume = false;
    bool dry_run = false;
    bool fail_fast = false;
    bool no_create_dirs = false;
    std::string shard;
    std::string progress;               // "", "bar", "jsonl", "none"
    std::vector<std::string> defaults;  // COMMAND's options given on the command line
};

// A volume file from this size on is "big": by default such jobs run one at a time, on every core.
constexpr std::uintmax_t kBigVolumeBytes = std::uintmax_t{4} << 20;

// The command's options, for checking manifest columns and building a job's arguments: their long
// names, looked up once per cell and argument.
class CommandOptions {
public:
    explicit CommandOptions(const std::string& command) {
        CLI::App app;
        in_process_registrar(command)(app);
        for (const CLI::Option* option : app.get_subcommand(command)->get_options()) {
            // CLI11 2.x marks an on/off flag by expecting no value after it (its type size stays 1).
            for (const std::string& name : option->get_lnames()) is_flag_[name] = option->get_expected_max() == 0;
        }
    }
    bool exists(const std::string& name) const { return is_flag_.count(name) != 0; }
    bool is_flag(const std::string& name) const {
        const auto found = is_flag_.find(name);
        return found != is_flag_.end() && found->second;
    }
    // Only --transform repeats (--size and --shift take one comma-separated value).
    bool repeatable(const std::string& name) const { return name == "transform"; }

private:
    std::map<std::string, bool, std::less<>> is_flag_;
};

// Whether a flag's last value sets it (values are checked as they are read: a manifest's by
// parse_flag_value, the defaults by CLI11).
bool flag_set(const Values& values, const std::string& name) {
    const auto found = values.find(name);
    return found != values.end() && !found->second.empty() && parse_flag_value(found->second.back()).value_or(false);
}

// The manifest's columns as COMMAND takes them.
ManifestColumns manifest_columns(const CommandOptions& options) {
    return ManifestColumns{[&options](const std::string& name) { return options.exists(name); },
                           [&options](const std::string& name) { return options.repeatable(name); },
                           [&options](const std::string& name) { return options.is_flag(name); }};
}

// The command line's defaults for COMMAND, as option name -> values.
Values parse_defaults(const std::string& command, const std::vector<std::string>& tokens) {
    CLI::App app;
    // The replaced callback held the options' storage: the new one keeps it alive while parsing.
    std::shared_ptr<void> storage = in_process_registrar(command)(app).storage;
    CLI::App* sub = app.get_subcommand(command);
    for (CLI::Option* option : sub->get_options()) option->required(false);
    sub->callback([storage] {});
    std::vector<std::string> args{"gridwarp", command};
    args.insert(args.end(), tokens.begin(), tokens.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        throw BatchSetupError(std::string("the options for every job: ") + e.what());
    }
    Values values;
    for (const CLI::Option* option : sub->get_options()) {
        if (option->count() == 0 || option->get_lnames().empty()) continue;
        const std::string& name = option->get_lnames().front();
        if (name == "help") continue;
        if (option->get_expected_max() == 0) {
            values[name] = {option->as<bool>() ? "true" : "false"};  // -q, --align-corners=false, ...
        } else {
            values[name] = option->results();
        }
    }
    return values;
}

// The defaults with the row's values over them.
Values merged_values(const Values& defaults, const Job& job) {
    Values merged = defaults;
    for (const auto& [name, values] : job.values) merged[name] = values;
    return merged;
}

// A job: the command's options by name, the row's values over the defaults (no command line is
// built: each value goes to its option as it is).
InProcessCall job_call(const Values& defaults, const Job& job, const CommandOptions& options, int threads) {
    const Values merged = merged_values(defaults, job);
    InProcessCall call;
    for (const auto& [name, values] : merged) {
        if (options.is_flag(name)) {
            if (flag_set(merged, name)) call.options.push_back({name, {"true"}});
            continue;
        }
        call.options.push_back({name, values});
    }
    if (merged.count("threads") == 0) call.options.push_back({"threads", {std::to_string(threads)}});
    if (!flag_set(merged, "verbose") && !flag_set(merged, "quiet")) call.options.push_back({"quiet", {"true"}});
    return call;
}

// The command line that runs a job as the program, for --dry-run.
std::vector<std::string> job_arguments(const std::string& command, const InProcessCall& call, const CommandOptions& options) {
    std::vector<std::string> args{command};
    for (const auto& [name, values] : call.options) {
        if (options.is_flag(name)) {
            args.push_back("--" + name);
            continue;
        }
        for (const auto& value : values) {
            args.push_back("--" + name);
            args.push_back(value);
        }
    }
    return args;
}

bool explains(const InProcessCall& call) {
    return std::any_of(call.options.begin(), call.options.end(), [](const auto& option) { return option.first == "explain"; });
}

// A job's error about its arguments, with the manifest cell it came from where the message names
// an option the row gives ("--rotate" for the cell of 'rotate'): options from the command line
// have no cell.
std::string name_the_cell(const std::string& error, const fs::path& manifest, const Job& job) {
    for (std::size_t at = error.find("--"); at != std::string::npos; at = error.find("--", at + 2)) {
        std::size_t end = at + 2;
        while (end < error.size() && (std::isalnum(static_cast<unsigned char>(error[end])) || error[end] == '-')) ++end;
        const std::string name = error.substr(at + 2, end - at - 2);
        if (job.values.count(name)) {
            const bool json = manifest.extension() == ".jsonl" || manifest.extension() == ".JSONL";
            return manifest.string() + ": line " + std::to_string(job.line) + ", " + (json ? "key '" : "column '") + name + "': " + error;
        }
    }
    return error;
}

// The folder each output is written in, made where it is missing unless `create` is false. An
// error message naming the output and folder, or empty: checked before the job reads anything.
std::string prepare_output_folders(const std::vector<std::string>& outputs, bool create) {
    for (const auto& output : outputs) {
        const fs::path folder = fs::path(output).parent_path();
        std::error_code error;
        if (folder.empty() || fs::is_directory(folder, error)) continue;
        if (!create) return output + ": its folder " + folder.string() + " does not exist (--no-create-dirs)";
        fs::create_directories(folder, error);
        if (error && !fs::is_directory(folder)) return output + ": cannot create its folder " + folder.string() + ": " + error.message();
    }
    return "";
}

// Why a job would fail before reading anything, for --dry-run: a missing input file, or an output
// folder that is missing (with --no-create-dirs) or that cannot be made or written in.
std::vector<std::string> dry_run_problems(const Values& merged, bool create_dirs, std::map<std::string, std::string>& folder_problems) {
    std::vector<std::string> problems;
    // Transforms are left out: their values may carry ",inverse" and other suffixes.
    for (const char* name : {"input", "reference", "flow", "grid", "theta", "matrix"}) {
        const auto values = merged.find(name);
        if (values == merged.end()) continue;
        for (const auto& file : values->second) {
            struct stat status;
            if (::stat(file.c_str(), &status) != 0) problems.push_back(file + " (--" + name + ") does not exist");
        }
    }
    if (const auto outputs = merged.find("output"); outputs != merged.end()) {
        // Rows share a few output folders: each is looked at once.
        const auto folder_problem = [&](const fs::path& folder) {
            std::error_code error;
            if (fs::is_directory(folder, error)) {
                return ::access(folder.c_str(), W_OK | X_OK) == 0 ? std::string() : "cannot write in its folder " + folder.string();
            }
            if (!create_dirs) return "its folder " + folder.string() + " does not exist (--no-create-dirs)";
            fs::path existing = folder;
            while (!existing.empty() && !fs::exists(existing, error)) existing = existing.parent_path();
            if (existing.empty()) existing = ".";
            if (!fs::is_directory(existing, error) || ::access(existing.c_str(), W_OK | X_OK) != 0) {
                return "cannot create its folder " + folder.string() + " in " + existing.string();
            }
            return std::string();
        };
        for (const auto& output : outputs->second) {
            const auto slash = output.rfind('/');
            const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : output.substr(0, slash);
            auto known = folder_problems.find(folder);
            if (known == folder_problems.end()) known = folder_problems.emplace(folder, folder_problem(folder)).first;
            if (!known->second.empty()) problems.push_back(output + ": " + known->second);
        }
    }
    return problems;
}

std::string quoted_command(const std::vector<std::string>& args) {
    std::string text = "gridwarp";
    for (const auto& a : args) {
        const bool plain = !a.empty() && a.find_first_of(" \t\"'\\$;&|<>()[]*?") == std::string::npos;
        text += " " + (plain ? a : "'" + a + "'");
    }
    return text;
}

// Progress on stderr: a bar redrawn in place on a terminal, or one JSON event per finished job.
// Written through original_stderr(): a job's reader may hold descriptor 2 meanwhile.
class Progress {
public:
    Progress(std::string mode, std::size_t total) : mode_(std::move(mode)), total_(total), start_(std::chrono::steady_clock::now()) {}

    void finished(std::size_t row, const std::string& status, const std::string& error, double seconds) {
        const std::lock_guard<std::mutex> lock(mutex_);
        ++finished_;
        if (status == "failed") ++failed_;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        if (mode_ == "jsonl") {
            nlohmann::ordered_json event;
            event["event"] = "job";
            event["row"] = row;
            event["status"] = status;
            event["error"] = error;
            event["seconds"] = seconds;
            event["finished"] = finished_;
            event["total"] = total_;
            event["failed"] = failed_;
            write_to_original_stderr(event.dump() + "\n");
        } else if (mode_ == "bar" && (elapsed - last_draw_ >= 0.1 || finished_ == total_)) {
            last_draw_ = elapsed;
            const double rate = elapsed > 0 ? static_cast<double>(finished_) / elapsed : 0.0;
            const double left = rate > 0 ? static_cast<double>(total_ - finished_) / rate : 0.0;
            constexpr int kWidth = 30;
            const int filled = total_ ? static_cast<int>(kWidth * finished_ / total_) : kWidth;
            char line[256];
            std::snprintf(line, sizeof line, "\r[%s%s] %zu/%zu  %.1f jobs/s  %.0f s left  %zu failed ",
                          std::string(static_cast<std::size_t>(filled), '#').c_str(),
                          std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), finished_, total_, rate, left, failed_);
            write_to_original_stderr(std::string(line) + (finished_ == total_ ? "\n" : ""));
        }
    }

private:
    std::string mode_;
    std::size_t total_, finished_ = 0, failed_ = 0;
    std::chrono::steady_clock::time_point start_;
    double last_draw_ = -1.0;
    std::mutex mutex_;
};

struct Outcome {
    std::string status = "not run";  // done, skipped, failed, not run
    std::string error;
    double seconds = 0;
};

// Refuses, before any job runs, two jobs that would write one file, and a --report that would
// replace the manifest or a file a job reads or writes: files compared by identity, not spelling,
// a pair by both halves (check_outputs_differ compares each job's own outputs and inputs). Jobs
// are added one at a time, so that a dry run checks its rows without holding them.
class BatchFileCheck {
public:
    BatchFileCheck(const BatchCommand& command, const Values& defaults)
        : defaults_(defaults), report_named_("--report " + command.report.string()) {
        if (command.report.empty()) return;
        for (const auto& file : io::files_written(command.report)) report_files_.insert(identify_(file));
        if (report_files_.count(identify_(command.manifest))) {
            throw BatchSetupError(report_named_ + ": it would overwrite the manifest; choose another path");
        }
    }

    void add(const Job& job) {
        const Values merged = merged_values(defaults_, job);
        for (const auto& [name, values] : merged) {
            if (kPathOptions.count(name) == 0) continue;
            const bool output = name == "output";
            if (!output && report_files_.empty()) continue;
            for (const auto& value : values) {
                std::filesystem::path path = value;
                if (name == "transform") {
                    try {
                        path = parse_transform_argument(value).file;
                    } catch (const std::invalid_argument&) {
                        continue;  // the job refuses it itself
                    }
                }
                for (const auto& file : output ? io::files_written(path) : io::files_read(path)) add_file(job.row, file, output);
            }
        }
    }

private:
    void add_file(std::size_t row, const fs::path& file, bool output) {
        const io::FileIdentity identity = identify_(file);
        if (report_files_.count(identity)) {
            throw BatchSetupError(report_named_ + ": it would overwrite " + file.string() + ", which row " + std::to_string(row) +
                                  (output ? " writes" : " reads") + "; choose another path");
        }
        if (!output) return;
        const auto [earlier, first] = written_.emplace(identity, row);
        if (!first && earlier->second != row) {
            throw BatchSetupError("rows " + std::to_string(earlier->second) + " and " + std::to_string(row) + " would both write " +
                                  file.string() + "; give each job an output of its own");
        }
    }

    const Values& defaults_;
    const std::string report_named_;
    io::FileIdentifier identify_;
    std::set<io::FileIdentity> report_files_;
    std::map<io::FileIdentity, std::size_t> written_;  // -> the row that writes it
};

// SIGINT and SIGTERM during a batch: no new job starts; the running ones finish, and the report
// and summary are written. The handler then gives the signal back its default, so that a second
// one ends the process at once.
volatile std::sig_atomic_t interrupted_by = 0;

extern "C" void on_batch_interrupt(int signal) {
    interrupted_by = signal;
    std::signal(signal, SIG_DFL);
}

class InterruptHandlers {
public:
    InterruptHandlers() {
        interrupted_by = 0;
        previous_int_ = std::signal(SIGINT, on_batch_interrupt);
        previous_term_ = std::signal(SIGTERM, on_batch_interrupt);
    }
    ~InterruptHandlers() {
        std::signal(SIGINT, previous_int_);
        std::signal(SIGTERM, previous_term_);
    }
    InterruptHandlers(const InterruptHandlers&) = delete;
    InterruptHandlers& operator=(const InterruptHandlers&) = delete;

private:
    void (*previous_int_)(int) = SIG_DFL;
    void (*previous_term_)(int) = SIG_DFL;
};

void run_batch(const BatchCommand& command) {
    if (!runs_in_batch(command.command)) {
        throw ExitStatus(2, "batch: COMMAND must be affine, resize, flow, resample or sample, got '" + command.command + "'");
    }
    const CommandOptions options(command.command);
    const ManifestColumns columns = manifest_columns(options);
    std::string manifest;
    Values defaults;
    Share shard;
    std::vector<Job> jobs;  // the shard's rows, in order
    const auto in_shard = [&](std::size_t row) { return row % shard.count == shard.index; };
    try {
        defaults = parse_defaults(command.command, command.defaults);
        try {
            shard = parse_share(command.shard, "--shard");
        } catch (const std::invalid_argument& e) {
            throw BatchSetupError(e.what());
        }
        manifest = io::read_file_bytes(command.manifest);
        BatchFileCheck files(command, defaults);
        if (command.dry_run) {
            // Every row checked before the first is printed; then the rows are read again, one at a time.
            read_manifest_jobs(manifest, command.manifest, columns, in_shard, [&](Job&& job) { files.add(job); });
        } else {
            read_manifest_jobs(manifest, command.manifest, columns, in_shard, [&](Job&& job) {
                files.add(job);
                jobs.push_back(std::move(job));
            });
            manifest = std::string();
        }
    } catch (const BatchSetupError& e) {
        throw ExitStatus(2, std::string("batch: ") + e.what());
    } catch (const std::exception& e) {
        throw ExitStatus(2, std::string("batch: ") + e.what());
    }
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    // Jobs at once and threads per job. By default small files run side by side, a job per core, and
    // big volumes one at a time with every core inside the job: as many jobs at once as there are
    // cores would hold as many volumes in memory. The first job's input decides.
    auto jobs_and_threads = [&](const Job* first) {
        auto big_volume = [&] {
            if (!first) return false;
            Values merged = merged_values(defaults, *first);
            if (merged.count("input") == 0 || merged["input"].empty()) return false;
            const fs::path input = merged["input"].front();
            std::error_code error;
            const auto size = fs::file_size(input, error);
            return !error && io::kind_for_path(input) == io::FileKind::Volume && size >= kBigVolumeBytes;
        };
        const int workers = command.jobs > 0 ? command.jobs : big_volume() ? 1 : static_cast<int>(cores);
        return std::make_pair(workers, std::max(1, static_cast<int>(cores) / workers));
    };

    auto outputs_of = [&](const Job& job) {
        Values merged = merged_values(defaults, job);
        return merged.count("output") ? merged["output"] : std::vector<std::string>{};
    };
    auto inputs_of = [&](const Job& job) {
        const Values merged = merged_values(defaults, job);
        std::vector<std::string> inputs;
        for (const auto& [name, values] : merged) {
            if (kPathOptions.count(name) && name != "output") inputs.insert(inputs.end(), values.begin(), values.end());
        }
        return inputs;
    };
    // A job's options as the report records them: what decides its outputs (not --threads).
    auto recorded_options = [&](const Job& job) {
        static const std::set<std::string> kNotDecidingOutputs{"threads", "quiet", "verbose"};
        nlohmann::ordered_json recorded = nlohmann::ordered_json::object();
        for (const auto& [name, values] : merged_values(defaults, job)) {
            if (kNotDecidingOutputs.count(name) == 0) recorded[name] = values;
        }
        return recorded;
    };
    // --resume with a --report from an earlier run: the options each finished job's outputs were made with.
    std::map<std::vector<std::string>, nlohmann::ordered_json> made_with;
    if (command.resume && !command.report.empty()) {
        std::ifstream earlier(command.report);
        for (std::string line; std::getline(earlier, line);) {
            const auto record = nlohmann::ordered_json::parse(line, nullptr, false);
            if (!record.is_object() || !record.contains("outputs") || !record.contains("options") || !record["outputs"].is_array()) continue;
            std::vector<std::string> outputs;
            for (const auto& output : record["outputs"]) {
                if (output.is_string()) outputs.push_back(output.get<std::string>());
            }
            // Outputs of a job that failed or did not run are older than its recorded options: redo it.
            const std::string status = record.value("status", "");
            made_with[outputs] = status == "done" || status == "skipped" ? record["options"] : nlohmann::ordered_json();
        }
    }
    // Complete outputs (they are written atomically) made with the job's options, as far as the report knows.
    auto outputs_present = [&](const Job& job) {
        const auto outputs = outputs_of(job);
        return !outputs.empty() && std::all_of(outputs.begin(), outputs.end(), [](const std::string& f) { return fs::exists(f); });
    };
    auto outputs_exist = [&](const Job& job) {
        if (!outputs_present(job)) return false;
        const auto earlier = made_with.find(outputs_of(job));
        return earlier == made_with.end() || earlier->second == recorded_options(job);
    };

    if (command.dry_run) {
        // Each job's command line as the rows are read (no row is held after it is printed), and
        // what the job would do when --explain is among its options: explaining reads the job's files.
        int threads_per_job = 0;
        std::optional<CommandRunner> runner;
        std::map<std::string, std::string> folder_problems;
        read_manifest_jobs(manifest, command.manifest, columns, in_shard, [&](Job&& job) {
            if (threads_per_job == 0) threads_per_job = jobs_and_threads(&job).second;
            const InProcessCall call = job_call(defaults, job, options, threads_per_job);
            const auto args = job_arguments(command.command, call, options);
            const bool skip = command.resume && outputs_exist(job);
            const char* note = skip ? "  # skipped: its outputs exist"
                               : command.resume && outputs_present(job) ? "  # redone: its outputs were made with other options"
                                                                        : "";
            std::cout << "row " << job.row << ": " << quoted_command(args) << note << "\n";
            if (skip) return;
            const std::vector<std::string> problems = dry_run_problems(merged_values(defaults, job), !command.no_create_dirs, folder_problems);
            for (const auto& problem : problems) std::cout << "  would fail: " << escape_control_characters(problem) << "\n";
            if (!problems.empty() || !explains(call)) return;
            if (!runner) runner.emplace(command.command);
            const std::string error = runner->run(call);
            if (!error.empty()) std::cout << "  would fail: " << escape_control_characters(error) << "\n";
        });
        std::cout.flush();
        return;
    }
    const auto sizing = jobs_and_threads(jobs.empty() ? nullptr : &jobs.front());
    const int workers = sizing.first, threads_per_job = sizing.second;

    // Files the jobs share (a reference, a transform, a displacement field) are read once, in up to
    // an eighth of the machine's memory (at most 2 GiB).
    const auto memory = static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGE_SIZE));
    io::enable_shared_files(std::min<std::size_t>(memory / 8, std::size_t{2} << 30));
    std::vector<Outcome> outcomes(jobs.size());
    // A bar only where someone watches (stderr a terminal) unless asked; nothing extra in logs.
    std::string mode = command.progress;
    if (mode.empty()) mode = ::isatty(original_stderr()) ? "bar" : "none";
    Progress progress(mode, jobs.size());
    // The report gets a line as each job ends, flushed, so that a killed batch leaves what it did
    // (--resume reads it); at the end, interrupted or not, it is written again whole, in row order.
    std::ofstream report;
    std::mutex report_mutex;
    if (!command.report.empty()) {
        report.open(command.report, std::ios::trunc);
        if (!report) throw ExitStatus(2, "batch: --report " + command.report.string() + ": cannot write it");
    }
    const auto report_text = [&](std::size_t k) {
        const Outcome& o = outcomes[k];
        nlohmann::ordered_json line;
        line["row"] = jobs[k].row;
        line["inputs"] = inputs_of(jobs[k]);
        line["outputs"] = outputs_of(jobs[k]);
        line["options"] = recorded_options(jobs[k]);
        line["status"] = o.status;
        line["error"] = o.error;
        line["seconds"] = o.seconds;
        return line.dump() + "\n";
    };
    const auto report_line = [&](std::size_t k) {
        if (command.report.empty()) return;
        const std::string text = report_text(k);
        const std::lock_guard<std::mutex> lock(report_mutex);
        report << text << std::flush;
    };
    const InterruptHandlers interrupt_handlers;
    // Each job's buffers reuse the pages the previous job freed instead of mapping fresh ones and
    // faulting them in (glibc otherwise returns freed blocks over 128 KiB, and the top of each
    // thread's heap, to the kernel): up to 64 MiB blocks stay in the heap, and heaps are not trimmed.
    ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
    ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
    std::atomic<std::size_t> next{0};
    std::atomic<bool> stop{false};
    auto worker = [&] {
        CommandRunner runner(command.command);
        for (;;) {
            const std::size_t k = next.fetch_add(1);
            if (k >= jobs.size() || stop.load() || interrupted_by != 0) return;
            const Job& job = jobs[k];
            Outcome& outcome = outcomes[k];
            if (command.resume && outputs_exist(job)) {
                outcome.status = "skipped";
                progress.finished(job.row, outcome.status, "", 0.0);
                report_line(k);
                continue;
            }
            const auto start = std::chrono::steady_clock::now();
            outcome.error = prepare_output_folders(outputs_of(job), !command.no_create_dirs);
            if (outcome.error.empty()) {
                outcome.error = runner.run(job_call(defaults, job, options, threads_per_job));
                if (runner.bad_arguments()) outcome.error = name_the_cell(outcome.error, command.manifest, job);
            }
            outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            outcome.status = outcome.error.empty() ? "done" : "failed";
            progress.finished(job.row, outcome.status, outcome.error, outcome.seconds);
            report_line(k);
            if (!outcome.error.empty() && command.fail_fast) stop = true;
        }
    };
    std::vector<std::thread> pool;
    for (int w = 0; w < std::min<int>(workers, static_cast<int>(jobs.size())); ++w) pool.emplace_back(worker);
    for (auto& thread : pool) thread.join();

    std::size_t done = 0, skipped = 0, failed = 0, not_run = 0;
    std::vector<std::string> first_errors;
    for (std::size_t k = 0; k < jobs.size(); ++k) {
        const Outcome& o = outcomes[k];
        if (o.status == "done") ++done;
        if (o.status == "skipped") ++skipped;
        if (o.status == "not run") ++not_run;
        if (o.status == "failed") {
            ++failed;
            if (first_errors.size() < 5) first_errors.push_back("row " + std::to_string(jobs[k].row) + ": " + escape_control_characters(o.error));
        }
    }
    if (report.is_open()) {
        report.close();
        io::write_file_atomically(command.report, [&](std::ostream& out) {
            for (std::size_t k = 0; k < jobs.size(); ++k) out << report_text(k);
        });
    }
    std::string summary = "batch: " + std::to_string(jobs.size()) + " job(s): " + std::to_string(done) + " done, " +
                          std::to_string(skipped) + " skipped, " + std::to_string(failed) + " failed";
    const int signal = interrupted_by;
    if (not_run > 0) {
        summary += ", " + std::to_string(not_run) + " not run (" +
                   (signal != 0 ? std::string(signal == SIGINT ? "interrupted" : "terminated") + "; --resume continues" : "--fail-fast") + ")";
    }
    if (const std::size_t shared = io::shared_file_hits(); shared > 0) {
        summary += "; " + std::to_string(shared) + " reads of shared files answered from memory";
    }
    summary += "\n";
    for (const auto& error : first_errors) summary += "  " + error + "\n";
    write_to_original_stderr(summary);
    if (signal != 0) throw ExitStatus(128 + signal, "");
    if (failed > 0) throw ExitStatus(3, "");
}

}  // namespace

CommandBinding register_batch_command(CLI::App& app) {
    auto command = std::make_shared<BatchCommand>();
    CLI::App* sub = app.add_subcommand("batch", "Run affine, resize, flow, resample or sample over the rows of a manifest, in one process");
    sub->add_option("COMMAND", command->command, "affine, resize, flow, resample or sample")->required();
    sub->add_option("MANIFEST", command->manifest,
                    ".csv/.tsv with a header row of COMMAND's long options, or .jsonl with one object per job")
        ->required();
    sub->add_option("--jobs", command->jobs,
                    "Jobs run at once (default: one per core on one thread each; one at a time on every core when the first "
                    "job's input is a volume file of 4 MiB or more)")
        ->check(CLI::Range(1, 4096));
    sub->add_option("--report", command->report, "Write one JSON line per job: row, inputs, outputs, options, status, error, seconds");
    sub->add_flag("--resume", command->resume,
                  "Skip the jobs whose outputs all exist (they are complete: outputs are written atomically), unless the "
                  "--report of an earlier run says they were made with other options");
    sub->add_option("--shard", command->shard, "Only the rows i with i mod N == K: K/N, or 'slurm' for K and N from a Slurm array job");
    sub->add_flag("--dry-run", command->dry_run, "Print each job's command line and write nothing");
    sub->add_flag("--fail-fast", command->fail_fast, "Start no new job after the first failure");
    sub->add_flag("--no-create-dirs", command->no_create_dirs,
                  "Fail a job whose output folder is missing instead of creating it (checked before the job reads anything)");
    sub->add_option("--progress", command->progress,
                    "bar (a progress bar on stderr; the default on a terminal), jsonl (one JSON event per job on stderr) or none")
        ->check(CLI::IsMember({"bar", "jsonl", "none"}));
    sub->allow_extras();
    sub->footer(
        "Options after MANIFEST that are not the batch's own are COMMAND's, given to every job; a row's\n"
        "cells override them. Relative paths in the manifest are relative to its folder.\n"
        "Exit status: 0 all done (or skipped), 3 some jobs failed, 2 the batch could not start.\n"
        "Examples:\n"
        "  gridwarp batch affine jobs.csv --rotate 15 --mode cubic --jobs 2 --report report.jsonl\n"
        "  gridwarp batch resample subjects.tsv --reference template.nii.gz --resume\n"
        "  gridwarp batch resample subjects.jsonl --shard slurm --resume   # in an sbatch --array job");
    sub->callback([command, sub] {
        command->defaults = sub->remaining();
        run_batch(*command);
    });
    CommandBinding binding;
    binding.app = sub;
    binding.storage = command;
    return binding;
}

}  // namespace gridwarp::cli
