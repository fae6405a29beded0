// gridwarp batch: manifests, defaults and overrides, failures and exit status, the report, resume,
// shards and dry runs. Every job's output is compared with the single command's output for the same
// options (byte equality is the property the batch promises).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "gridwarp/io/atomic_file.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

const fs::path kCard = fs::path(GRIDWARP_TEST_DATA).parent_path().parent_path() / "data" / "card.png";

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

std::string bytes_of(const fs::path& file) { return io::read_file_bytes(file); }

// Three inputs in `dir`: a.png, b.png (copies of the bundled card) and v.nii.gz (a NIfTI fixture).
void make_inputs(const fs::path& dir) {
    fs::copy_file(kCard, dir / "a.png");
    fs::copy_file(kCard, dir / "b.png");
    fs::copy_file(data_dir() / "images" / "oblique_i2.nii.gz", dir / "v.nii.gz");
    fs::create_directories(dir / "out");
}

std::vector<nlohmann::json> report_lines(const fs::path& file) {
    std::vector<nlohmann::json> lines;
    std::istringstream in(bytes_of(file));
    std::string line;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

// Runs `batch affine` on a manifest FILE holding TEXT: the batch must not start (exit 2), with one
// error line holding every needle and no NUL byte.
void check_manifest_refused(const fs::path& file, const std::string& text, const std::vector<std::string>& needles) {
    INFO(file.filename().string());
    write_text(file, text);
    const RunResult r = run_gridwarp({"batch", "affine", file.string(), "--rotate", "5"});
    INFO(describe(r));
    CHECK(r.status == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find('\0') == std::string::npos);
    for (const auto& needle : needles) CHECK(r.err.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("batch: csv, tsv and jsonl manifests give the single commands' outputs byte for byte", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    // Defaults on the command line (--scale 0.8, --mode cubic), overridden by some rows.
    write_text(dir / "jobs.csv", "input,output,rotate,mode\n"
                                 "a.png,out/a.png,10,\n"
                                 "\"b.png\",out/b.png,,nearest\n"
                                 "v.nii.gz,out/v.nii.gz,30,linear\n");
    const RunResult batch = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--scale", "0.8", "--mode", "cubic", "--jobs", "2"});
    INFO(describe(batch));
    REQUIRE(batch.status == 0);
    const std::vector<std::pair<std::string, std::vector<std::string>>> singles = {
        {"a.png", {"--rotate", "10", "--scale", "0.8", "--mode", "cubic"}},
        {"b.png", {"--scale", "0.8", "--mode", "nearest"}},
        {"v.nii.gz", {"--rotate", "30", "--scale", "0.8", "--mode", "linear"}}};
    for (const auto& [name, options] : singles) {
        std::vector<std::string> args{"affine", "-i", (dir / name).string(), "-o", (dir / ("single_" + name)).string()};
        args.insert(args.end(), options.begin(), options.end());
        const RunResult single = run_gridwarp(args);
        INFO(describe(single));
        REQUIRE(single.status == 0);
        CHECK(bytes_of(dir / "out" / name) == bytes_of(dir / ("single_" + name)));
    }

    // The same jobs as TSV and as JSONL.
    write_text(dir / "jobs.tsv", "input\toutput\trotate\n../a.png\ttsv_a.png\t10\n");
    fs::create_directories(dir / "sub");
    fs::rename(dir / "jobs.tsv", dir / "sub" / "jobs.tsv");  // relative paths are relative to the manifest's folder
    write_text(dir / "jobs.jsonl", "{\"input\": \"a.png\", \"output\": \"json_a.png\", \"rotate\": 10, \"mode\": null}\n\n");
    REQUIRE(run_gridwarp({"batch", "affine", (dir / "sub" / "jobs.tsv").string(), "--scale", "0.8", "--mode", "cubic"}).status == 0);
    REQUIRE(run_gridwarp({"batch", "affine", (dir / "jobs.jsonl").string(), "--scale", "0.8", "--mode", "cubic"}).status == 0);
    CHECK(bytes_of(dir / "sub" / "tsv_a.png") == bytes_of(dir / "single_a.png"));
    CHECK(bytes_of(dir / "json_a.png") == bytes_of(dir / "single_a.png"));
}

TEST_CASE("batch: repeatable options take ';' in csv and arrays in jsonl", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "shift.txt", "1 0 0 2\n0 1 0 -1\n0 0 1 0.5\n0 0 0 1\n");
    write_text(dir / "turn.txt", "0.8 -0.6 0 0\n0.6 0.8 0 0\n0 0 1 0\n0 0 0 1\n");
    write_text(dir / "jobs.csv", "input,output,transform\nv.nii.gz,out/csv.nii.gz,\"shift.txt,lps;turn.txt,lps\"\n");
    write_text(dir / "jobs.jsonl", "{\"input\": \"v.nii.gz\", \"output\": \"out/json.nii.gz\", \"transform\": [\"shift.txt,lps\", \"turn.txt,lps\"]}\n");
    REQUIRE(run_gridwarp({"batch", "resample", (dir / "jobs.csv").string()}).status == 0);
    REQUIRE(run_gridwarp({"batch", "resample", (dir / "jobs.jsonl").string()}).status == 0);
    REQUIRE(run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-o", (dir / "single.nii.gz").string(), "-t",
                          (dir / "shift.txt").string() + ",lps", "-t", (dir / "turn.txt").string() + ",lps"})
                .status == 0);
    CHECK(bytes_of(dir / "out" / "csv.nii.gz") == bytes_of(dir / "single.nii.gz"));
    CHECK(bytes_of(dir / "out" / "json.nii.gz") == bytes_of(dir / "single.nii.gz"));
}

TEST_CASE("batch: a manifest that cannot start the batch exits 2 with one line naming file, line and column", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> cases = {
        {"unknown.csv", "input,output,rotat\na.png,out/x.png,3\n", {"unknown.csv", "line 1", "column 3", "rotat"}},
        {"cells.csv", "input,output\na.png\n", {"cells.csv", "line 2", "1 cells, expected 2"}},
        {"quote.csv", "input,output\n\"a.png,out/x.png\n", {"quote.csv", "not closed"}},
        {"bad.jsonl", "{\"input\": \"a.png\", \"output\": \"out/x.png\"}\n{\"input\": }\n", {"bad.jsonl", "line 2", "not JSON"}},
        {"key.jsonl", "{\"inputt\": \"a.png\"}\n", {"key.jsonl", "line 1", "inputt"}},
        {"jobs.txt", "input,output\n", {"jobs.txt", ".csv, .tsv or .jsonl"}},
    };
    for (const auto& [name, text, needles] : cases) check_manifest_refused(dir / name, text, needles);
    CHECK(fs::is_empty(dir / "out"));
    const RunResult missing = run_gridwarp({"batch", "affine", (dir / "absent.csv").string()});
    CHECK(missing.status == 2);
    CHECK(missing.err.find("absent.csv") != std::string::npos);
}

TEST_CASE("batch: failing jobs leave no output, the others finish, exit 3, and the report says which", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\n"
                                 "a.png,out/a.png,10\n"
                                 "missing.png,out/m.png,10\n"
                                 "b.png,out/n.png,not-a-number\n"
                                 "b.png,out/b.png,20\n");
    const RunResult r = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--report", (dir / "report.jsonl").string()});
    INFO(describe(r));
    CHECK(r.status == 3);
    CHECK(r.err.find("4 job(s): 2 done, 0 skipped, 2 failed") != std::string::npos);
    CHECK(r.err.find("missing.png") != std::string::npos);
    CHECK(listing(dir / "out") == std::vector<std::string>{"a.png", "b.png"});
    const auto report = report_lines(dir / "report.jsonl");
    REQUIRE(report.size() == 4);
    const std::vector<std::string> statuses = {"done", "failed", "failed", "done"};
    for (std::size_t i = 0; i < 4; ++i) {
        INFO(report[i].dump());
        CHECK(report[i]["row"] == i);
        CHECK(report[i]["status"] == statuses[i]);
        CHECK(report[i]["outputs"].size() == 1);
        CHECK(report[i]["inputs"].size() == 1);
        CHECK((report[i]["error"].get<std::string>().empty()) == (statuses[i] == "done"));
        CHECK(report[i]["seconds"].get<double>() >= 0);
    }
    CHECK(report[2]["error"].get<std::string>().find("rotate") != std::string::npos);

    // --fail-fast on one job at a time: nothing after the first failure starts.
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    const RunResult fast = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--jobs", "1", "--fail-fast"});
    CHECK(fast.status == 3);
    CHECK(fast.err.find("1 done, 0 skipped, 1 failed, 2 not run") != std::string::npos);
    CHECK(listing(dir / "out") == std::vector<std::string>{"a.png"});
}

TEST_CASE("batch: --resume skips the jobs whose outputs exist and leaves them untouched", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nb.png,out/b.png,20\n");
    write_text(dir / "out" / "a.png", "an earlier run's output");
    const RunResult r = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--resume"});
    INFO(describe(r));
    CHECK(r.status == 0);
    CHECK(r.err.find("2 job(s): 1 done, 1 skipped, 0 failed") != std::string::npos);
    CHECK(bytes_of(dir / "out" / "a.png") == "an earlier run's output");
    REQUIRE(fs::exists(dir / "out" / "b.png"));
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--resume", "--dry-run", "--explain"});
    CHECK(dry.status == 0);
    CHECK(dry.out.find("row 0: ") != std::string::npos);
    CHECK(dry.out.find("row 1: ") != std::string::npos);
    // Both outputs exist now: both skipped, so neither is explained.
    std::size_t skipped = 0;
    for (std::size_t at = dry.out.find("skipped"); at != std::string::npos; at = dry.out.find("skipped", at + 1)) ++skipped;
    CHECK(skipped == 2);
    CHECK(dry.out.find("mapping: ") == std::string::npos);
}

TEST_CASE("batch: --dry-run prints the command lines, and with --explain what each job would do", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nmissing.png,out/m.png,20\n");
    const RunResult lines = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--dry-run"});
    INFO(describe(lines));
    CHECK(lines.status == 0);
    CHECK(lines.out.find("row 0: gridwarp affine --input ") != std::string::npos);
    CHECK(lines.out.find("row 1: gridwarp affine --input ") != std::string::npos);
    CHECK(lines.out.find("mapping: ") == std::string::npos);
    // Without --explain no input is read, but a missing one is named.
    const auto line1 = lines.out.find("row 1: ");
    CHECK(lines.out.find("would fail") > line1);
    CHECK(lines.out.find("would fail: " + (dir / "missing.png").string() + " (--input) does not exist", line1) != std::string::npos);

    const RunResult explained = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--dry-run", "--explain"});
    INFO(describe(explained));
    CHECK(explained.status == 0);
    const auto row1 = explained.out.find("row 1: ");
    REQUIRE(row1 != std::string::npos);
    // Row 0's explanation comes before row 1's line; row 1 names its missing input.
    const auto mapping = explained.out.find("mapping: ");
    CHECK(mapping < row1);
    CHECK(explained.out.find("would fail: ", row1) != std::string::npos);
    CHECK(explained.out.find("missing.png", row1) != std::string::npos);
    CHECK(fs::is_empty(dir / "out"));
}

TEST_CASE("batch: --dry-run refuses two rows writing one file, as the run does", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nb.png,out/./a.png,20\n");
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--dry-run"});
    INFO(describe(dry));
    CHECK(dry.status == 2);
    CHECK(dry.out.empty());
    CHECK(dry.err.find("rows 0 and 1 would both write") != std::string::npos);
}

TEST_CASE("batch: shards K/N and slurm split the rows by index, every row exactly once", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    std::string manifest = "input,output,rotate\n";
    for (int i = 0; i < 7; ++i) manifest += "a.png,out/r" + std::to_string(i) + ".png," + std::to_string(i) + "\n";
    write_text(dir / "jobs.csv", manifest);
    std::multiset<std::string> rows;
    for (int k = 0; k < 3; ++k) {
        const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--shard", std::to_string(k) + "/3", "--dry-run"});
        REQUIRE(dry.status == 0);
        std::istringstream in(dry.out);
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("row ", 0) != 0) continue;  // the jobs' explanations
            const std::string row = line.substr(0, line.find(':'));
            const int index = std::stoi(row.substr(4));
            CHECK(index % 3 == k);
            rows.insert(row);
        }
    }
    CHECK(rows.size() == 7);
    CHECK(std::set<std::string>(rows.begin(), rows.end()).size() == 7);
    CHECK(listing(dir / "out").empty());  // dry runs write nothing

    ::setenv("SLURM_ARRAY_TASK_ID", "11", 1);
    ::setenv("SLURM_ARRAY_TASK_MIN", "10", 1);
    ::setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
    const RunResult slurm = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--shard", "slurm"});
    ::unsetenv("SLURM_ARRAY_TASK_ID");
    ::unsetenv("SLURM_ARRAY_TASK_MIN");
    ::unsetenv("SLURM_ARRAY_TASK_COUNT");
    INFO(describe(slurm));
    CHECK(slurm.status == 0);
    CHECK(listing(dir / "out") == std::vector<std::string>{"r1.png", "r4.png"});
    for (const char* bad : {"3/3", "1", "a/2", "-1/2"}) {
        const RunResult r = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--shard", bad});
        CHECK(r.status == 2);
    }
}

TEST_CASE("batch: --progress jsonl writes one event per job; without it nothing extra when stderr is a file", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nb.png,out/b.png,20\nmissing.png,out/m.png,5\n");
    const RunResult quiet = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string()});
    CHECK(quiet.status == 3);
    CHECK(line_count(quiet.err) == 2);  // the summary and the one failure
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    const RunResult events = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--progress", "jsonl"});
    CHECK(events.status == 3);
    std::istringstream in(events.err);
    std::string line;
    std::set<std::size_t> rows;
    std::size_t last_finished = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line.front() != '{') continue;
        const auto event = nlohmann::json::parse(line);
        CHECK(event["event"] == "job");
        CHECK(event["total"] == 3);
        rows.insert(event["row"].get<std::size_t>());
        CHECK(event["finished"].get<std::size_t>() == last_finished + 1);
        last_finished = event["finished"].get<std::size_t>();
        CHECK((event["status"] == "failed") == (event["row"] == 2));
    }
    CHECK(rows == std::set<std::size_t>{0, 1, 2});
}

TEST_CASE("explain: --explain prints the mapping, the sampling and the output, and writes nothing", "[cli][batch][explain]") {
    TempDir dir;
    make_inputs(dir.path());
    // A pixel matrix given as a file is printed as it is (output pixel -> input pixel).
    write_text(dir / "m.txt", "0.5 0.25 3\n-0.125 2 -4.5\n");
    const RunResult affine = run_gridwarp({"affine", "-i", (dir / "a.png").string(), "-o", (dir / "out" / "x.png").string(), "--matrix",
                                           (dir / "m.txt").string(), "--mode", "cubic", "--padding", "border", "--explain"});
    INFO(describe(affine));
    CHECK(affine.status == 0);
    CHECK(affine.out.find("mapping: [[0.5, 0.25, 3], [-0.125, 2, -4.5]]") != std::string::npos);
    CHECK(affine.out.find("sampling: cubic, padding border") != std::string::npos);
    CHECK(affine.out.find("size 320 x 240 (W x H)") != std::string::npos);
    // A translation of (2, -1, 0.5) mm on a 2 x 1 x 0.5 mm grid moves by (1, -1, 1) voxels along the
    // axes when the direction is the identity; the fixture's direction is not, so compare with the
    // LPS translation turned into voxels by the grid itself: the linear part stays the identity.
    write_text(dir / "t.txt", "1 0 0 2\n0 1 0 -1\n0 0 1 0.5\n0 0 0 1\n");
    const RunResult resample = run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-o", (dir / "out" / "y.nii.gz").string(), "-t",
                                             (dir / "t.txt").string() + ",lps", "--explain"});
    INFO(describe(resample));
    CHECK(resample.status == 0);
    // output index -> input index = i + (D S)^-1 t, with D orthonormal: offset_k = (D^T t)_k / s_k.
    const auto info = nlohmann::json::parse(run_gridwarp({"info", "--json", (dir / "v.nii.gz").string()}).out);
    const double t[3] = {2, -1, 0.5};
    const auto begin = resample.out.find("mapping: [[");
    REQUIRE(begin != std::string::npos);
    std::string numbers = resample.out.substr(begin + 9, resample.out.find(" (output index", begin) - begin - 9);
    for (char& c : numbers) {
        if (c == '[' || c == ']' || c == ',') c = ' ';
    }
    std::istringstream values(numbers);
    std::vector<double> m;
    for (double v; values >> v;) m.push_back(v);
    REQUIRE(m.size() == 12);
    for (int k = 0; k < 3; ++k) {
        for (int j = 0; j < 3; ++j) CHECK(std::abs(m[4 * k + j] - (j == k ? 1.0 : 0.0)) < 1e-12);
        double expected = 0;
        for (int i = 0; i < 3; ++i) expected += info["direction"][i][k].get<double>() * t[i];
        expected /= info["spacing"][k].get<double>();
        CHECK(std::abs(m[4 * k + 3] - expected) < 1e-6);  // a float32 header: D^T is D^-1 to ~1e-8
    }
    CHECK(resample.out.find("t.txt") != std::string::npos);
    CHECK(fs::is_empty(dir / "out"));
    CHECK(listing(dir.path()) == std::vector<std::string>{"a.png", "b.png", "m.txt", "out", "t.txt", "v.nii.gz"});
}

TEST_CASE("batch: a reference and a transform shared by every row are read once", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "shift.txt", "1 0 0 2\n0 1 0 -1\n0 0 1 0.5\n0 0 0 1\n");
    write_text(dir / "jobs.csv", "output\nout/r0.nii.gz\nout/r1.nii.gz\nout/r2.nii.gz\n");
    const RunResult r = run_gridwarp({"batch", "resample", (dir / "jobs.csv").string(), "--input", (dir / "v.nii.gz").string(), "--reference",
                                      (dir / "v.nii.gz").string(), "--transform", (dir / "shift.txt").string() + ",lps", "--jobs", "1"});
    INFO(describe(r));
    REQUIRE(r.status == 0);
    // Rows 1 and 2 take the reference's header and the transform from memory: 4 reads saved.
    CHECK(r.err.find("3 job(s): 3 done, 0 skipped, 0 failed; 4 reads of shared files answered from memory") != std::string::npos);
    REQUIRE(run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-r", (dir / "v.nii.gz").string(), "-t", (dir / "shift.txt").string() + ",lps",
                          "-o", (dir / "single.nii.gz").string()})
                .status == 0);
    for (const char* name : {"r0.nii.gz", "r1.nii.gz", "r2.nii.gz"}) CHECK(bytes_of(dir / "out" / name) == bytes_of(dir / "single.nii.gz"));
}

TEST_CASE("batch: by default small files run a job per core, a big volume one job on every core", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    // A 5 MiB int16 volume, made by resizing the small fixture.
    REQUIRE(run_gridwarp({"affine", "-i", (dir / "v.nii.gz").string(), "-o", (dir / "big.nii").string(), "--size", "160,160,100"}).status == 0);
    REQUIRE(fs::file_size(dir / "big.nii") >= (std::uintmax_t{4} << 20));
    write_text(dir / "small.csv", "input,output,rotate\na.png,out/a.png,5\n");
    write_text(dir / "big.csv", "input,output,rotate\nbig.nii,out/big.nii,5\n");
    const RunResult small = run_gridwarp({"batch", "affine", (dir / "small.csv").string(), "--dry-run"});
    const RunResult big = run_gridwarp({"batch", "affine", (dir / "big.csv").string(), "--dry-run"});
    CHECK(small.out.find("--threads 1 ") != std::string::npos);
    CHECK(big.out.find("--threads " + std::to_string(cores) + " ") != std::string::npos);
    const RunResult chosen = run_gridwarp({"batch", "affine", (dir / "big.csv").string(), "--dry-run", "--jobs", std::to_string(cores)});
    CHECK(chosen.out.find("--threads 1 ") != std::string::npos);
}

TEST_CASE("progress: a single command shows its phases on a terminal, and nothing otherwise", "[cli][progress]") {
    TempDir dir;
    make_inputs(dir.path());
    // A terminal from util-linux's script(1); the delay set to 0 so that a short run shows the bar.
    auto on_terminal = [&](const std::string& extra) {
        const fs::path log = dir / "terminal.txt";
        std::ostringstream command;  // (a stream: GCC 12 warns falsely on a long chain of string +)
        command << "GRIDWARP_PROGRESS_AFTER_MS=0 script -qec \"'" << binary().string() << "' affine -i '" << (dir / "a.png").string()
                << "' -o '" << (dir / "out" / "t.png").string() << "' --rotate 5" << extra << "\" /dev/null > '" << log.string() << "' 2>&1";
        REQUIRE(std::system(command.str().c_str()) == 0);
        return bytes_of(log);
    };
    const std::string shown = on_terminal("");
    CHECK(shown.find("gridwarp affine: [") != std::string::npos);
    CHECK(shown.find("sampling (2/3)") != std::string::npos);
    CHECK(shown.find("writing (3/3)") != std::string::npos);
    CHECK(fs::exists(dir / "out" / "t.png"));
    CHECK(on_terminal(" --quiet").find("gridwarp affine: [") == std::string::npos);
    const RunResult plain = run_gridwarp({"affine", "-i", (dir / "a.png").string(), "-o", (dir / "out" / "u.png").string(), "--rotate", "5"});
    CHECK(plain.status == 0);
    CHECK(plain.err.find('\r') == std::string::npos);
}

TEST_CASE("batch: --max-memory applies to each job, as a default and as a column", "[cli][batch][budget]") {
    TempDir dir;
    make_inputs(dir.path());
    // The 320x240 RGB card is 230400 bytes in; --size 400,300 makes 360000 bytes out. The budget
    // given as a default is one byte short of the output; the second row raises it, the third
    // lowers it below the input.
    write_text(dir / "jobs.csv", "input,output,max-memory\n"
                                 "a.png,out/a.png,\n"
                                 "b.png,out/b.png,360000\n"
                                 "b.png,out/c.png,1K\n");
    const RunResult r = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--size", "400,300", "--max-memory", "359999",
                                      "--report", (dir / "report.jsonl").string()});
    INFO(describe(r));
    CHECK(r.status == 3);
    CHECK(listing(dir / "out") == std::vector<std::string>{"b.png"});
    const auto report = report_lines(dir / "report.jsonl");
    REQUIRE(report.size() == 3);
    CHECK(report[0]["error"].get<std::string>().find("--size: the output needs 360000 bytes (351.6 KiB), more than --max-memory "
                                                     "359999 bytes") != std::string::npos);
    CHECK(report[1]["status"] == "done");
    CHECK(report[2]["error"].get<std::string>().find("needs 230400 bytes (225 KiB), more than --max-memory 1024 bytes (1 KiB)") !=
          std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// On/off flags, progress beside the jobs, manifests as spreadsheets write them, numbers past their
// range, and a million rows (issue 32).
// ---------------------------------------------------------------------------------------------

namespace {

// The single command's output for `options`, written to `output`.
void run_single_affine(const fs::path& input, const fs::path& output, const std::vector<std::string>& options) {
    std::vector<std::string> args{"affine", "-i", input.string(), "-o", output.string()};
    args.insert(args.end(), options.begin(), options.end());
    const RunResult single = run_gridwarp(args);
    INFO(describe(single));
    REQUIRE(single.status == 0);
}

// Runs `command` on a pseudo-terminal (util-linux script(1)); returns its exit status and what the
// terminal showed.
std::pair<int, std::string> run_on_terminal(const std::string& command, const fs::path& log) {
    const std::string line = "script -qefc \"" + command + "\" /dev/null > '" + log.string() + "' 2>&1";
    const int raw = std::system(line.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, bytes_of(log)};
}

}  // namespace

TEST_CASE("batch: on/off flags as defaults and as columns reach the jobs as the single command takes them", "[cli][batch][flags]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "m.txt", "0.9 0.2 -3\n-0.1 1.1 4\n");
    const fs::path matrix = dir / "m.txt";
    // Defaults -q and --align-corners (short and long names); the rows turn --inverse on and off in
    // every spelling, and one row turns the default --align-corners off.
    write_text(dir / "flags.csv", "input,output,matrix,inverse,align-corners\n"
                                  "a.png,out/t.png,m.txt,true,\n"
                                  "a.png,out/f.png,m.txt,false,\n"
                                  "a.png,out/one.png,m.txt,1,0\n"
                                  "a.png,out/zero.png,m.txt,0,\n"
                                  "a.png,out/yes.png,m.txt,Yes,no\n"
                                  "a.png,out/no.png,m.txt,NO,\n"
                                  "a.png,out/unset.png,m.txt,,\n");
    const RunResult csv = run_gridwarp({"batch", "affine", (dir / "flags.csv").string(), "-q", "--align-corners", "--mode", "cubic", "--jobs", "2"});
    INFO(describe(csv));
    REQUIRE(csv.status == 0);
    CHECK(csv.err.find("7 job(s): 7 done") != std::string::npos);
    const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
        {"t.png", {"--inverse", "--align-corners"}}, {"f.png", {"--align-corners"}}, {"one.png", {"--inverse"}},
        {"zero.png", {"--align-corners"}},           {"yes.png", {"--inverse"}},     {"no.png", {"--align-corners"}},
        {"unset.png", {"--align-corners"}}};
    for (const auto& [name, flags] : expected) {
        INFO(name);
        std::vector<std::string> options{"--matrix", matrix.string(), "--mode", "cubic", "-q"};
        options.insert(options.end(), flags.begin(), flags.end());
        run_single_affine(dir / "a.png", dir / ("single_" + name), options);
        CHECK(bytes_of(dir / "out" / name) == bytes_of(dir / ("single_" + name)));
    }
    // --inverse changes the output (else the comparison above proves nothing; a pixel matrix maps
    // pixel centres, so --align-corners does not change it).
    CHECK(bytes_of(dir / "out" / "t.png") != bytes_of(dir / "out" / "f.png"));

    // JSON booleans and numbers, with -v as a default: the jobs report what they write.
    write_text(dir / "flags.jsonl", "{\"input\": \"a.png\", \"output\": \"out/jt.png\", \"matrix\": \"m.txt\", \"inverse\": true}\n"
                                    "{\"input\": \"a.png\", \"output\": \"out/jf.png\", \"matrix\": \"m.txt\", \"inverse\": false, "
                                    "\"align-corners\": 1}\n");
    const RunResult jsonl = run_gridwarp({"batch", "affine", (dir / "flags.jsonl").string(), "-v", "--jobs", "1"});
    INFO(describe(jsonl));
    REQUIRE(jsonl.status == 0);
    CHECK(jsonl.err.find("out/jt.png") != std::string::npos);
    run_single_affine(dir / "a.png", dir / "single_jt.png", {"--matrix", matrix.string(), "--inverse"});
    run_single_affine(dir / "a.png", dir / "single_jf.png", {"--matrix", matrix.string(), "--align-corners"});
    CHECK(bytes_of(dir / "out" / "jt.png") == bytes_of(dir / "single_jt.png"));
    CHECK(bytes_of(dir / "out" / "jf.png") == bytes_of(dir / "single_jf.png"));

    // --explain as a default: every job explains itself and writes nothing.
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    const RunResult explain = run_gridwarp({"batch", "affine", (dir / "flags.csv").string(), "--explain", "--verbose"});
    INFO(describe(explain));
    CHECK(explain.status == 0);
    std::size_t explained = 0;
    for (std::size_t at = explain.out.find("mapping: "); at != std::string::npos; at = explain.out.find("mapping: ", at + 1)) ++explained;
    CHECK(explained == 7);
    CHECK(fs::is_empty(dir / "out"));

    // A flag's cell that is neither true nor false stops the batch before it starts.
    write_text(dir / "maybe.csv", "input,output,matrix,inverse\na.png,out/m.png,m.txt,maybe\n");
    const RunResult maybe = run_gridwarp({"batch", "affine", (dir / "maybe.csv").string()});
    INFO(describe(maybe));
    CHECK(maybe.status == 2);
    CHECK(line_count(maybe.err) == 1);
    for (const char* needle : {"maybe.csv", "line 2", "column 4", "'maybe'", "inverse"}) CHECK(maybe.err.find(needle) != std::string::npos);
    CHECK(fs::is_empty(dir / "out"));
}

TEST_CASE("batch: progress never lands in a job's error, and every jsonl event is written", "[cli][batch][progress]") {
    TempDir dir;
    make_inputs(dir.path());
    constexpr int kJobs = 60;
    std::string manifest = "input,output,rotate\n";
    for (int i = 0; i < kJobs; ++i) manifest += (i % 2 ? "a.png" : "b.png") + std::string(",out/r") + std::to_string(i) + ".png," + std::to_string(i) + "\n";
    write_text(dir / "jobs.csv", manifest);

    // JSON events from four jobs at a time: one well-formed event per job, counted in order.
    const RunResult events = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--progress", "jsonl", "--jobs", "4"});
    INFO(describe(events));
    CHECK(events.status == 0);
    std::istringstream in(events.err);
    std::string line;
    std::set<std::size_t> rows;
    std::size_t last_finished = 0, others = 0;
    while (std::getline(in, line)) {
        if (line.rfind("{", 0) != 0) {
            ++others;
            continue;
        }
        const auto event = nlohmann::json::parse(line);
        CHECK(event["status"] == "done");
        CHECK(event["error"] == "");
        CHECK(event["total"] == kJobs);
        CHECK(event["finished"].get<std::size_t>() == last_finished + 1);
        last_finished = event["finished"].get<std::size_t>();
        rows.insert(event["row"].get<std::size_t>());
    }
    CHECK(rows.size() == static_cast<std::size_t>(kJobs));
    CHECK(last_finished == static_cast<std::size_t>(kJobs));
    CHECK(others == 1);  // the summary
    CHECK(events.err.find(std::to_string(kJobs) + " job(s): " + std::to_string(kJobs) + " done") != std::string::npos);

    // On a terminal: the batch's bar, with verbose jobs whose own phase bars and log lines show at
    // once, several jobs side by side. No job fails, and no error holds progress text.
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    const fs::path report = dir / "report.jsonl";
    const auto [status, terminal] = run_on_terminal("GRIDWARP_PROGRESS_AFTER_MS=0 '" + binary().string() + "' batch affine '" +
                                                        (dir / "jobs.csv").string() + "' --jobs 4 -v --report '" + report.string() + "'",
                                                    dir / "terminal.txt");
    INFO(terminal);
    CHECK(status == 0);
    CHECK(terminal.find(" jobs/s ") != std::string::npos);  // the batch's bar was drawn
    const auto lines = report_lines(report);
    CHECK(lines.size() == static_cast<std::size_t>(kJobs));
    for (const auto& job : lines) {
        INFO(job.dump());
        CHECK(job["status"] == "done");
        CHECK(job["error"] == "");
    }
    CHECK(listing(dir / "out").size() == static_cast<std::size_t>(kJobs));
}

TEST_CASE("batch: a UTF-8 byte-order mark is skipped in csv, tsv and jsonl manifests", "[cli][batch][manifest]") {
    TempDir dir;
    make_inputs(dir.path());
    const std::string bom = "\xEF\xBB\xBF";
    write_text(dir / "bom.csv", bom + "input,output,rotate\na.png,out/csv.png,10\n");
    write_text(dir / "bom.tsv", bom + "input\toutput\trotate\na.png\tout/tsv.png\t10\n");
    write_text(dir / "bom.jsonl", bom + "{\"input\": \"a.png\", \"output\": \"out/jsonl.png\", \"rotate\": 10}\n");
    for (const char* name : {"bom.csv", "bom.tsv", "bom.jsonl"}) {
        const RunResult r = run_gridwarp({"batch", "affine", (dir / name).string()});
        INFO(name << "\n" << describe(r));
        CHECK(r.status == 0);
    }
    run_single_affine(dir / "a.png", dir / "single.png", {"--rotate", "10"});
    for (const char* name : {"csv.png", "tsv.png", "jsonl.png"}) CHECK(bytes_of(dir / "out" / name) == bytes_of(dir / "single.png"));
    // A mark anywhere else is content: an unknown column.
    write_text(dir / "inner.csv", "input," + bom + "output\na.png,out/x.png\n");
    CHECK(run_gridwarp({"batch", "affine", (dir / "inner.csv").string()}).status == 2);
}

TEST_CASE("batch: a NUL byte in a cell, and counts past their range, stop the batch with one line", "[cli][batch][manifest]") {
    TempDir dir;
    make_inputs(dir.path());
    using namespace std::string_literals;
    const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> cases = {
        {"nul.csv", "input,output\na.png,out/x.png\na.png,out/y.png\0.png\n"s, {"nul.csv", "line 3", "column 2", "NUL"}},
        {"quoted.csv", "input,output\n\"a.png\",\"out/\0x.png\"\n"s, {"quoted.csv", "line 2", "column 2", "NUL"}},
        {"nul.tsv", "input\toutput\na.png\tout/x.png\0\n"s, {"nul.tsv", "line 2", "column 2", "NUL"}},
        {"escaped.jsonl", "{\"input\": \"a.png\", \"output\": \"out/x.png\\u0000.png\"}\n"s, {"escaped.jsonl", "line 1", "'output'", "NUL"}},
        {"raw.jsonl", "{\"input\": \"a.png\"}\n{\"input\": \"a.png\", \"output\": \"out/\0\"}\n"s, {"raw.jsonl", "line 2", "NUL"}},
    };
    for (const auto& [name, text, needles] : cases) check_manifest_refused(dir / name, text, needles);
    CHECK(fs::is_empty(dir / "out"));

    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\n");
    for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{{"--shard", "1/99999999999999999999"},
                                                                                     {"--shard", "99999999999999999999/3"},
                                                                                     {"--shard", "0/18446744073709551616"},
                                                                                     {"--jobs", "99999999999999999999"},
                                                                                     {"--threads", "99999999999999999999"}}) {
        std::vector<std::string> args{"batch", "affine", (dir / "jobs.csv").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        const RunResult r = run_gridwarp(args);
        INFO(describe(r));
        CHECK(r.status == 2);
        CHECK(line_count(r.err) == 1);
        CHECK(r.err.find(extra[0]) != std::string::npos);
    }
    // The largest count that fits is a count: shard 0 of 2^64-1 takes row 0.
    const RunResult widest = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--shard", "0/18446744073709551615"});
    INFO(describe(widest));
    CHECK(widest.status == 0);
    CHECK(fs::exists(dir / "out" / "a.png"));
}

TEST_CASE("batch: a million-row manifest is dry-run in seconds, holding only its outputs' identities", "[cli][batch][scale]") {
    TempDir dir;
    make_inputs(dir.path());
    constexpr int kRows = 1000000;
    {
        std::ofstream out(dir / "million.csv", std::ios::binary);
        out << "input,output,rotate\n";
        for (int i = 0; i < kRows; ++i) out << "in/" << i << ".png,out/" << i << ".png," << (i % 360) << "\n";
    }
    const auto timed = [&](const std::string& extra, const fs::path& stdout_file) {
        const fs::path usage = dir / "usage.txt";
        // CPU seconds (user + system), not wall time: the bound is on the work, which other tests
        // running beside this one (ctest -j) do not change.
        const std::string command = "/usr/bin/time -f '%U %S %M' -o '" + usage.string() + "' '" + binary().string() + "' batch affine '" +
                                    (dir / "million.csv").string() + "' --dry-run" + extra + " > '" + stdout_file.string() + "' 2>&1";
        const int raw = std::system(command.c_str());
        std::istringstream in(bytes_of(usage));
        double user = 0, system = 0, max_rss_kb = 0;
        in >> user >> system >> max_rss_kb;
        return std::make_tuple(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, user + system, max_rss_kb / 1024);
    };
    const auto [status, seconds, rss_mb] = timed("", dir / "all.txt");
    WARN("10^6-row dry run: " << seconds << " CPU s, peak RSS " << rss_mb << " MB");
    CHECK(status == 0);
    // One row in a thousand, explained: the parsed rows of the others are not held.
    const auto [shard_status, shard_seconds, shard_rss_mb] = timed(" --shard 7/1000 --explain", dir / "shard.txt");
    WARN("10^6-row dry run of shard 7/1000 with --explain: " << shard_seconds << " CPU s, peak RSS " << shard_rss_mb << " MB");
    CHECK(shard_status == 0);
    // Every output's identity is kept (two rows may not write one file): about 120 bytes a row.
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer tracks every allocation and keeps freed memory in quarantine.
    CHECK(seconds < 240);
    CHECK(shard_seconds < 240);
    CHECK(rss_mb < 3000);
    CHECK(shard_rss_mb < 2000);
#else
    // Room for a virtual machine whose speed varies twofold from run to run.
    CHECK(seconds < 40);
    CHECK(shard_seconds < 40);
    CHECK(rss_mb < 300);
    CHECK(shard_rss_mb < 150);
#endif
    const std::string all = bytes_of(dir / "all.txt");
    CHECK(all.find("row 0: ") == 0);
    CHECK(all.find("row 999999: ") != std::string::npos);
    const std::string shard = bytes_of(dir / "shard.txt");
    CHECK(shard.find("row 999007: ") != std::string::npos);
    CHECK(shard.find("would fail: ") != std::string::npos);
}

// ---- Everyday batches: output folders, cells named in errors, resume against the report ----

TEST_CASE("batch: missing output folders are made, or with --no-create-dirs refused before reading", "[cli][batch][folders]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,new/deep/a.png,10\nb.png,new/b.png,20\n");
    const RunResult refused = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--no-create-dirs"});
    INFO(describe(refused));
    CHECK(refused.status == 3);
    CHECK(refused.err.find("2 failed") != std::string::npos);
    CHECK(refused.err.find("new/deep does not exist (--no-create-dirs)") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "new"));
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--no-create-dirs", "--dry-run"});
    CHECK(dry.out.find("would fail: " + (dir / "new" / "deep" / "a.png").string() + ": its folder") != std::string::npos);

    const RunResult made = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string()});
    INFO(describe(made));
    CHECK(made.status == 0);
    CHECK(fs::exists(dir / "new" / "deep" / "a.png"));
    CHECK(fs::exists(dir / "new" / "b.png"));
}

// (A file where the folder should be: permissions would not stop root, who runs CI.)
TEST_CASE("batch: an output folder that cannot be made is a would-fail line, and a failed job", "[cli][batch][folders]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "blocked", "a file where a folder should be");
    write_text(dir / "jobs.csv", "input,output\na.png,blocked/x.png\n");
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--dry-run"});
    INFO(describe(dry));
    CHECK(dry.out.find("would fail: " + (dir / "blocked" / "x.png").string() + ": cannot create its folder") != std::string::npos);
    const RunResult run = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string()});
    INFO(describe(run));
    CHECK(run.status == 3);
    CHECK(run.err.find("cannot create its folder") != std::string::npos);
}

TEST_CASE("batch: a cell the command cannot take names its manifest line and column", "[cli][batch][manifest]") {
    TempDir dir;
    make_inputs(dir.path());
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\n\nb.png,out/b.png,abc\n");
    const RunResult csv = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string()});
    INFO(describe(csv));
    CHECK(csv.status == 3);
    CHECK(csv.err.find((dir / "jobs.csv").string() + ": line 4, column 'rotate': ") != std::string::npos);
    write_text(dir / "jobs.jsonl", "{\"input\": \"a.png\", \"output\": \"out/c.png\", \"scale\": \"big\"}\n");
    const RunResult jsonl = run_gridwarp({"batch", "affine", (dir / "jobs.jsonl").string()});
    INFO(describe(jsonl));
    CHECK(jsonl.err.find((dir / "jobs.jsonl").string() + ": line 1, key 'scale': ") != std::string::npos);
    // An option from the command line has no cell.
    const RunResult defaults = run_gridwarp({"batch", "affine", (dir / "jobs.jsonl").string(), "--rotate", "x"});
    CHECK(defaults.status != 0);
    CHECK(defaults.err.find("column 'rotate'") == std::string::npos);
}

TEST_CASE("batch: --resume redoes a job the report says was made with other options", "[cli][batch]") {
    TempDir dir;
    make_inputs(dir.path());
    const std::string report = (dir / "report.jsonl").string();
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nb.png,out/b.png,20\n");
    REQUIRE(run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--report", report}).status == 0);
    const auto first = report_lines(dir / "report.jsonl");
    REQUIRE(first.size() == 2);
    CHECK(first[1]["options"]["rotate"] == nlohmann::json::array({"20"}));
    const std::string b_before = bytes_of(dir / "out" / "b.png");

    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,10\nb.png,out/b.png,30\n");
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--report", report, "--resume", "--dry-run"});
    CHECK(dry.out.find("out/a.png --rotate 10 --threads 1 --quiet  # skipped") != std::string::npos);
    CHECK(dry.out.find("# redone: its outputs were made with other options") != std::string::npos);
    const RunResult again = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--report", report, "--resume"});
    INFO(describe(again));
    CHECK(again.err.find("2 job(s): 1 done, 1 skipped, 0 failed") != std::string::npos);
    CHECK(bytes_of(dir / "out" / "b.png") != b_before);
    // Without a report of the earlier run, existing outputs are all that is known.
    write_text(dir / "jobs.csv", "input,output,rotate\na.png,out/a.png,40\nb.png,out/b.png,50\n");
    const RunResult blind = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--resume"});
    CHECK(blind.err.find("0 done, 2 skipped") != std::string::npos);
}
