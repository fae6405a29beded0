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
    write_text(dir / "jobs.csv", "input,output,transform\nv.nii.gz,out/csv.nii.gz,shift.txt;turn.txt\n");
    write_text(dir / "jobs.jsonl", "{\"input\": \"v.nii.gz\", \"output\": \"out/json.nii.gz\", \"transform\": [\"shift.txt\", \"turn.txt\"]}\n");
    REQUIRE(run_gridwarp({"batch", "resample", (dir / "jobs.csv").string()}).status == 0);
    REQUIRE(run_gridwarp({"batch", "resample", (dir / "jobs.jsonl").string()}).status == 0);
    REQUIRE(run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-o", (dir / "single.nii.gz").string(), "-t",
                          (dir / "shift.txt").string(), "-t", (dir / "turn.txt").string()})
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
    for (const auto& [name, text, needles] : cases) {
        INFO(name);
        write_text(dir / name, text);
        const RunResult r = run_gridwarp({"batch", "affine", (dir / name).string(), "--rotate", "5"});
        INFO(describe(r));
        CHECK(r.status == 2);
        CHECK(line_count(r.err) == 1);
        for (const auto& needle : needles) CHECK(r.err.find(needle) != std::string::npos);
    }
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
    const RunResult dry = run_gridwarp({"batch", "affine", (dir / "jobs.csv").string(), "--resume", "--dry-run"});
    CHECK(dry.status == 0);
    CHECK(dry.out.find("row 0: ") != std::string::npos);
    CHECK(dry.out.find("row 1: ") != std::string::npos);
    // Both outputs exist now: both skipped, so neither is explained.
    std::size_t skipped = 0;
    for (std::size_t at = dry.out.find("skipped"); at != std::string::npos; at = dry.out.find("skipped", at + 1)) ++skipped;
    CHECK(skipped == 2);
    CHECK(dry.out.find("mapping: ") == std::string::npos);
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
    CHECK(affine.out.find("spatial (240, 320)") != std::string::npos);
    // A translation of (2, -1, 0.5) mm on a 2 x 1 x 0.5 mm grid moves by (1, -1, 1) voxels along the
    // axes when the direction is the identity; the fixture's direction is not, so compare with the
    // LPS translation turned into voxels by the grid itself: the linear part stays the identity.
    write_text(dir / "t.txt", "1 0 0 2\n0 1 0 -1\n0 0 1 0.5\n0 0 0 1\n");
    const RunResult resample = run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-o", (dir / "out" / "y.nii.gz").string(), "-t",
                                             (dir / "t.txt").string(), "--explain"});
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
                                      (dir / "v.nii.gz").string(), "--transform", (dir / "shift.txt").string(), "--jobs", "1"});
    INFO(describe(r));
    REQUIRE(r.status == 0);
    // Rows 1 and 2 take the reference's header and the transform from memory: 4 reads saved.
    CHECK(r.err.find("3 job(s): 3 done, 0 skipped, 0 failed; 4 reads of shared files answered from memory") != std::string::npos);
    REQUIRE(run_gridwarp({"resample", "-i", (dir / "v.nii.gz").string(), "-r", (dir / "v.nii.gz").string(), "-t", (dir / "shift.txt").string(),
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
