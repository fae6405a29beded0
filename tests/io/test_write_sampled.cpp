// io::write_sampled: outputs made a block of rows at a time (.nii.gz, .img.gz, .hdr/.img) hold
// every voxel the sampler was asked for, read back through the NIfTI reader; the blocks cover
// every row of every channel exactly once (one channel a block where the file stores a volume per
// channel), each sampled on one thread; a plain .nii is sampled in one call; a
// sampler that fails leaves the earlier file and no staging folder behind. The expected voxels
// come from a formula of the voxel's own indices, not from another write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "gridwarp/io/image.hpp"
#include "support/support.hpp"

using namespace gridwarp;
using namespace gridwarp::test;
namespace fs = std::filesystem;

namespace {

// The value of channel c at spatial index (outermost first): distinct for neighbouring voxels,
// rows and slices, and within every tested dtype's range.
double voxel_value(std::int64_t c, const Shape& index) {
    std::int64_t value = 7 * c;
    for (std::size_t a = 0; a < index.size(); ++a) value = value * 31 + index[a];
    return static_cast<double>(value % 200);
}

struct Calls {
    std::mutex mutex;
    std::vector<std::int64_t> row_count;  // times each channel's row (channel, outer index flattened) was sampled
    std::size_t calls = 0;
    std::vector<int> threads;
    std::int64_t most_channels = 0;  // in one call
};

// A sampler that writes voxel_value into the view and records which rows it was asked for.
io::WindowSampler recording_sampler(const Shape& spatial, std::int64_t channels, Calls& calls) {
    std::int64_t rows = 1;
    for (std::size_t a = 0; a + 1 < spatial.size(); ++a) rows *= spatial[a];
    calls.row_count.assign(static_cast<std::size_t>(rows * channels), 0);
    return [&calls, spatial, rows](const Shape& start, const Shape& extent, std::int64_t first_channel, const TensorView& pixels,
                                   int threads) {
        REQUIRE(pixels.shape.size() == extent.size() + 2);
        REQUIRE(extent.back() == spatial.back());
        const std::size_t rank = extent.size();
        Shape local(rank, 0);
        for (std::int64_t i = 0; i < shape_numel(extent); ++i) {
            std::int64_t rest = i;
            for (std::size_t a = rank; a-- > 0;) {
                local[a] = rest % extent[a];
                rest /= extent[a];
            }
            Shape index(rank);
            for (std::size_t a = 0; a < rank; ++a) index[a] = start[a] + local[a];
            for (std::int64_t c = 0; c < pixels.shape[1]; ++c) {
                std::int64_t offset = c * pixels.strides[1];
                for (std::size_t a = 0; a < rank; ++a) offset += local[a] * pixels.strides[a + 2];
                const double value = voxel_value(first_channel + c, index);
                switch (pixels.dtype) {
                    case DType::UInt8: pixels.typed<std::uint8_t>()[offset] = static_cast<std::uint8_t>(value); break;
                    case DType::Int16: pixels.typed<std::int16_t>()[offset] = static_cast<std::int16_t>(value); break;
                    case DType::Float32: pixels.typed<float>()[offset] = static_cast<float>(value); break;
                    default: FAIL("unexpected dtype");
                }
            }
        }
        std::lock_guard lock(calls.mutex);
        ++calls.calls;
        calls.threads.push_back(threads);
        calls.most_channels = std::max(calls.most_channels, pixels.shape[1]);
        // The rows of the box, flattened over the outer axes, of each channel it holds.
        const Shape outer_extent(extent.begin(), extent.end() - 1);
        for (std::int64_t c = 0; c < pixels.shape[1]; ++c) {
            for (std::int64_t r = 0; r < shape_numel(outer_extent); ++r) {
                std::int64_t rest = r, flat = 0, scale = 1;
                for (std::size_t a = outer_extent.size(); a-- > 0;) {
                    flat += (start[a] + rest % outer_extent[a]) * scale;
                    rest /= outer_extent[a];
                    scale *= spatial[a];
                }
                ++calls.row_count[static_cast<std::size_t>((first_channel + c) * rows + flat)];
            }
        }
    };
}

io::Image description(DType dtype, const Shape& spatial, std::int64_t channels) {
    io::Image image;
    image.kind = io::FileKind::Volume;
    image.format = "nifti";
    image.spatial = spatial;
    image.channels = channels;
    image.layout = io::ChannelLayout::Interleaved;
    image.geometry = io::Geometry::identity(spatial.size());
    image.pixels = Tensor(dtype, Shape{0});
    return image;
}

// Every voxel of `read` equals voxel_value; returns the first mismatch, or "".
std::string compare_with_formula(const io::Image& read) {
    const ConstTensorView view = read.nchw();
    const std::size_t rank = read.spatial.size();
    Shape index(rank, 0);
    for (std::int64_t i = 0; i < shape_numel(read.spatial); ++i) {
        std::int64_t rest = i;
        for (std::size_t a = rank; a-- > 0;) {
            index[a] = rest % read.spatial[a];
            rest /= read.spatial[a];
        }
        for (std::int64_t c = 0; c < read.channels; ++c) {
            std::int64_t offset = c * view.strides[1];
            for (std::size_t a = 0; a < rank; ++a) offset += index[a] * view.strides[a + 2];
            double got = 0;
            switch (view.dtype) {
                case DType::UInt8: got = view.typed<std::uint8_t>()[offset]; break;
                case DType::Int16: got = view.typed<std::int16_t>()[offset]; break;
                case DType::Float32: got = view.typed<float>()[offset]; break;
                default: return "unexpected dtype";
            }
            if (got != voxel_value(c, index)) {
                return "voxel " + shape_to_string(index) + " channel " + std::to_string(c) + ": " + std::to_string(got) +
                       ", expected " + std::to_string(voxel_value(c, index));
            }
        }
    }
    return "";
}

}  // namespace

TEST_CASE("write_sampled: NIfTI outputs made a block of rows at a time hold every voxel", "[io][write_sampled]") {
    struct Case {
        std::string name;
        DType dtype;
        Shape spatial;
        std::int64_t channels;
        io::ChannelSampling channel_sampling = io::ChannelSampling::Together;
    };
    const std::vector<Case> cases = {
        // 128 KiB slices: slabs of 8 slices, the last one shorter.
        {"int16 slabs", DType::Int16, {43, 64, 1024}, 1},
        // 1.25 MiB slices of 32 KiB rows: boxes of 32 rows inside each slice.
        {"float32 boxes in slices", DType::Float32, {3, 41, 8192}, 1},
        {"float32 2-D rows", DType::Float32, {3000, 500}, 1},
        {"RGB24", DType::UInt8, {5, 300, 400}, 3},
        // A 4-D series whose volumes are sampled apart: the file holds a volume per channel, so a
        // block is rows of one channel.
        {"int16 series of 6 volumes", DType::Int16, {5, 30, 40}, 6, io::ChannelSampling::Apart},
        {"float32 series with 1.25 MiB slices", DType::Float32, {3, 41, 8192}, 2, io::ChannelSampling::Apart},
        // Sampled together: a group of channels a call (all six here), a channel a block.
        {"int16 series sampled together", DType::Int16, {5, 30, 40}, 6, io::ChannelSampling::Together},
        {"float32 series of 3 MiB volumes sampled together", DType::Float32, {3, 32, 8192}, 14, io::ChannelSampling::Together},
        {"tiny", DType::Int16, {1, 1, 3}, 1},
    };
    for (const auto& c : cases) {
        for (const std::string extension : {".nii.gz", ".img.gz", ".hdr", ".nii"}) {
            DYNAMIC_SECTION(c.name << extension) {
                TempDir dir;
                const fs::path file = dir / ("out" + extension);
                Calls calls;
                // (A level given: the default's trial would sample one block once more.)
                io::WriteOptions options;
                options.compression_level = 4;
                io::write_sampled(file, description(c.dtype, c.spatial, c.channels), options, 2, recording_sampler(c.spatial, c.channels, calls),
                                  nullptr, c.channel_sampling);

                const bool pair = extension != ".nii.gz" && extension != ".nii";
                std::vector<std::string> expected_files = {"out" + extension};
                if (extension == ".img.gz") expected_files = {"out.hdr.gz", "out.img.gz"};
                if (extension == ".hdr") expected_files = {"out.hdr", "out.img"};
                auto files = listing(dir.path());
                std::sort(files.begin(), files.end());
                CHECK(files == expected_files);

                // Every row sampled exactly once.
                for (std::size_t r = 0; r < calls.row_count.size(); ++r) {
                    INFO("row " << r);
                    REQUIRE(calls.row_count[r] == 1);
                }
                if (extension == ".nii") {
                    CHECK(calls.calls == 1);  // sampled into the mapped file, with every thread given
                    CHECK(calls.threads == std::vector<int>{2});
                } else {
                    for (int threads : calls.threads) CHECK(threads == 1);
                    // A file of a volume per channel: one channel a call where the channels are
                    // sampled apart; a group of them (up to kChannelGroupBytes) where together.
                    const bool volume_per_channel = c.channels > 1 && c.dtype != DType::UInt8;
                    if (volume_per_channel && c.channel_sampling == io::ChannelSampling::Apart) CHECK(calls.most_channels == 1);
                    if (volume_per_channel && c.channel_sampling == io::ChannelSampling::Together) {
                        const std::int64_t volume_mib = shape_numel(c.spatial) * static_cast<std::int64_t>(dtype_size(c.dtype)) >> 20;
                        CHECK(calls.most_channels == std::min<std::int64_t>(c.channels, 32 / std::max<std::int64_t>(1, volume_mib)));
                    }
                }

                const io::Image read = io::read_image(pair ? dir / expected_files.front() : file);
                REQUIRE(read.spatial == c.spatial);
                REQUIRE(read.channels == c.channels);
                REQUIRE(read.dtype() == c.dtype);
                CHECK(compare_with_formula(read) == "");
            }
        }
    }
    SECTION("blocks of about 1 MiB") {
        TempDir dir;
        Calls calls;
        const Shape spatial{43, 64, 1024};  // int16: 128 KiB slices, 5.4 MiB in all
        io::WriteOptions options;
        options.compression_level = 4;
        io::write_sampled(dir / "out.nii.gz", description(DType::Int16, spatial, 1), options, 2, recording_sampler(spatial, 1, calls));
        CHECK(calls.calls == 6);  // 8 slices a block: 5 full blocks and 3 slices
    }
    SECTION("the default level's trial samples the middle block once more") {
        for (const std::int64_t channels : {1, 3}) {
            TempDir dir;
            Calls calls;
            const Shape spatial{43, 64, 1024};  // 5.4 MiB a channel: tried
            io::write_sampled(dir / "out.nii.gz", description(DType::Int16, spatial, channels), {}, 2,
                              recording_sampler(spatial, channels, calls));
            std::int64_t twice = 0;
            for (const std::int64_t count : calls.row_count) {
                REQUIRE((count == 1 || count == 2));
                twice += count == 2;
            }
            CHECK(twice == 8 * 64);  // one block: 8 slices of 64 rows
            CHECK(compare_with_formula(io::read_image(dir / "out.nii.gz")) == "");
        }
    }
}

TEST_CASE("write_sampled: a sampler that fails leaves the earlier file and nothing else", "[io][write_sampled][errors]") {
    // (A series of 3 volumes is sampled a group of channels at a time: the threads that wait for a
    // group whose sampling fails stop with the same error.)
    for (const std::string extension : {".nii.gz", ".nii", "series.nii.gz"}) {
        DYNAMIC_SECTION(extension) {
            const std::int64_t channels = extension == "series.nii.gz" ? 3 : 1;
            TempDir dir;
            const fs::path file = dir / ("out" + extension);
            std::ofstream(file) << "earlier";
            std::mutex mutex;
            int calls = 0;
            const io::WindowSampler failing = [&](const Shape&, const Shape&, std::int64_t, const TensorView&, int) {
                std::lock_guard lock(mutex);
                if (++calls == 3 || extension == ".nii") throw std::runtime_error("sampler failed");
            };
            CHECK_THROWS_WITH(io::write_sampled(file, description(DType::Int16, {43, 64, 1024}, channels), {}, 2, failing),
                              "sampler failed");
            CHECK(listing(dir.path()) == std::vector<std::string>{"out" + extension});
            std::ifstream in(file);
            std::string text;
            in >> text;
            CHECK(text == "earlier");
        }
    }
}
