// Internal: gzip (RFC 1952) reading and writing for the volume codecs.
//  - Reading inflates with libdeflate into a buffer sized from the file's own header, so a stream is
//    decompressed once, straight into the voxel buffer (docs/design.md says why libdeflate).
//  - Writing compresses fixed-size blocks concurrently with libdeflate and joins them into one
//    gzip member (a single deflate stream), which every gzip reader accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

struct libdeflate_compressor;

#include "files/output_file.hpp"
#include "gridwarp/io/image.hpp"

namespace gridwarp::io::detail {

// The compression levels libdeflate offers: 0 stores, 12 compresses hardest.
inline constexpr int kMinCompressionLevel = 0;
inline constexpr int kMaxCompressionLevel = 12;
// The default: files within 1 % of zlib level 6's size (docs/design.md), at a fraction of its time.
inline constexpr int kDefaultCompressionLevel = 4;
// Level 1's greedy matching, about 30 % faster than level 4, which the default takes for data
// where level 4's longer match searches buy less than kDefaultLevelGain (noise-like voxels).
inline constexpr int kFastCompressionLevel = 1;
inline constexpr double kDefaultLevelGain = 0.005;
// Data this long or longer is tried before the default level is chosen, on at most
// kLevelTrialBytes of one block (a trial costs a hundredth or less of the compression).
inline constexpr std::uint64_t kLevelTrialMinBytes = std::uint64_t{4} << 20;
inline constexpr std::uint64_t kLevelTrialBytes = std::uint64_t{256} << 10;

// The level to compress with: `requested` (0..12) as it is; the default (-1) resolved by a trial on
// the first kLevelTrialBytes of `sample`, a block of the data: kFastCompressionLevel where level kDefaultCompressionLevel makes it
// less than kDefaultLevelGain smaller, else kDefaultCompressionLevel. The same data always gets the
// same level.
int resolve_compression_level(int requested, std::span<const std::uint8_t> sample);

// Deflate cannot expand data more than this many times (a run of one byte): a stream of n bytes
// never inflates to more than about kMaxDeflateRatio * n bytes.
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

bool has_gzip_magic(std::span<const std::uint8_t> bytes);

// The first up to `count` bytes that the gzip file `file` inflates to (fewer when it ends sooner).
// Reads only as much of the file as that takes. Throws FileError on a corrupt stream.
std::vector<std::uint8_t> gunzip_prefix(const std::filesystem::path& file, std::size_t count);

// Inflates the gzip data `compressed` (one member or several, concatenated) into `out`, which must
// be filled exactly: throws FileError naming `file` when the data is corrupt or inflates to fewer
// bytes. Data that inflates to more than `out` holds is accepted and the excess ignored. With
// `threads` other than 1 (0: every core), a second thread faults `out` in while one inflates.
void gunzip_into(std::span<const std::uint8_t> compressed, std::span<std::uint8_t> out, const std::filesystem::path& file,
                 int threads = 1);
// The same for data whose length the header does not give (a trailer after the voxels): fills at
// least the first `required` bytes of `out` and as much of the rest as the data holds, and returns
// the bytes written.
std::size_t gunzip_at_least_into(std::span<const std::uint8_t> compressed, std::span<std::uint8_t> out, std::size_t required,
                                 const std::filesystem::path& file, int threads = 1);

// The same after discarding the first `skip` bytes the data inflates to (a gap before the voxels),
// which pass through a small buffer and are never stored. One thread, zlib's inflater.
void gunzip_skipping_into(std::span<const std::uint8_t> compressed, std::uint64_t skip, std::span<std::uint8_t> out,
                          const std::filesystem::path& file);

// Compresses the concatenation of `pieces` into one gzip member, `threads` blocks at a time
// (0: every core), and hands the compressed bytes to `sink` in order. `level` is 0..12.
void gzip_compress(const std::vector<std::span<const std::uint8_t>>& pieces, int level, int threads,
                   const std::function<void(std::span<const std::uint8_t>)>& sink);
// The same for a stream made block by block: each block is made and compressed by one thread, so
// a block sampled just before it is compressed is still in that core's cache. Blocks of about
// kGzipBlockBytes compress as the pieces' form does. The first exception of the source or the
// sink is rethrown once every thread has stopped.
void gzip_compress(const BlockSource& source, int level, int threads, const std::function<void(std::span<const std::uint8_t>)>& sink);

// The same blocks as one zlib stream (RFC 1950, as PNG stores its image data) or one gzip member.
enum class DeflateContainer { Gzip, Zlib };
// The calling thread's libdeflate compressor for `level`, kept for the thread's life: allocating
// one per file touched fresh pages each time (a fifth of a batch of small PNGs' time).
libdeflate_compressor* thread_compressor(int level);

void deflate_compress(const BlockSource& source, int level, int threads, DeflateContainer container,
                      const std::function<void(std::span<const std::uint8_t>)>& sink);

// The source of the concatenated `pieces` in blocks of `block_bytes` (the last one shorter): a
// block inside one piece is a view of it, one across pieces is copied into the scratch.
BlockSource blocks_of(const std::vector<std::span<const std::uint8_t>>& pieces, std::uint64_t block_bytes);

// The block size of the pieces' form: large enough that blocks compressed apart (each without the
// previous one's window) lose little size, small enough to stay in a core's cache.
inline constexpr std::uint64_t kGzipBlockBytes = std::uint64_t{1} << 20;

// Writes `pieces` one after another to `staged`, gzipped into one member when `compress`, at the
// level options.compression_level resolves to (the default is tried on the data's middle block).
void write_pieces(const StagedFile& staged, const std::vector<std::span<const std::uint8_t>>& pieces, bool compress,
                  const WriteOptions& options);

}  // namespace gridwarp::io::detail
