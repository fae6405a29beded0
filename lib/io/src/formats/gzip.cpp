#include "formats/gzip.hpp"

#include <libdeflate.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gridwarp/io/error.hpp"

namespace gridwarp::io::detail {

namespace fs = std::filesystem;

bool has_gzip_magic(std::span<const std::uint8_t> bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

std::vector<std::uint8_t> gunzip_prefix(const fs::path& file, std::size_t count) {
    gzFile stream = gzopen(file.c_str(), "rb");
    if (!stream) throw FileError(file, "cannot open for reading");
    const std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(stream, gzclose);
    std::vector<std::uint8_t> bytes(count);
    std::size_t got = 0;
    while (got < count) {
        const int n = gzread(stream, bytes.data() + got, static_cast<unsigned>(std::min<std::size_t>(count - got, 1u << 30)));
        if (n < 0) {
            int code = 0;
            throw FileError(file, std::string("corrupt gzip data: ") + gzerror(stream, &code));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    bytes.resize(got);
    return bytes;
}

namespace {

struct MemberResult {
    std::size_t in_used = 0;
    std::size_t out_written = 0;
    bool complete = false;  // the member ended with a valid trailer, or `out` was filled
    std::string problem;
};

// One gzip member through zlib, stopping once `out` is full: for members that inflate to more than
// the caller wants, and to say precisely what is wrong with one libdeflate refused.
MemberResult inflate_member_with_zlib(std::span<const std::uint8_t> in, std::span<std::uint8_t> out) {
    MemberResult result;
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        result.problem = "cannot start decompressing";
        return result;
    }
    z.next_in = const_cast<Bytef*>(in.data());
    std::size_t in_left = in.size();
    std::size_t out_left = out.size();
    z.next_out = out.data();
    int status = Z_OK;
    while (status == Z_OK && out_left > 0) {
        const auto in_step = static_cast<uInt>(std::min<std::size_t>(in_left, 1u << 30));
        const auto out_step = static_cast<uInt>(std::min<std::size_t>(out_left, 1u << 30));
        z.avail_in = in_step;
        z.avail_out = out_step;
        status = inflate(&z, Z_NO_FLUSH);
        in_left -= in_step - z.avail_in;
        out_left -= out_step - z.avail_out;
        if (status == Z_BUF_ERROR && in_left == 0) break;  // the data ends early
        if (status == Z_BUF_ERROR) status = Z_OK;
    }
    result.in_used = in.size() - in_left;
    result.out_written = out.size() - out_left;
    result.complete = status == Z_STREAM_END || out_left == 0;
    if (!result.complete) {
        result.problem = status == Z_OK || status == Z_BUF_ERROR ? "the compressed data ends early (truncated)"
                                                                  : std::string("corrupt gzip data: ") + (z.msg ? z.msg : "invalid stream");
    }
    inflateEnd(&z);
    return result;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it with EINVAL, and nothing is done
#endif

// Inflating runs on one thread, which faults in every page of the fresh output buffer as it
// writes; on this project's VMs that first touch costs about as much as the inflating itself. A
// second thread, where the caller allows one, faults the buffer in from its far end meanwhile
// (MADV_POPULATE_WRITE: present pages are left as they are, so it never races the inflater's
// writes) and stops when told or when it reaches the front.
class BackgroundPrefault {
public:
    BackgroundPrefault(std::span<std::uint8_t> buffer, int threads) {
        constexpr std::size_t kStep = std::size_t{2} << 20;
        if (buffer.size() < 4 * kStep || threads == 1 || (threads == 0 && omp_get_num_procs() < 2)) return;
        worker_ = std::thread([this, buffer] {
            const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
            const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data());
            std::uintptr_t end = (begin + buffer.size()) & ~(page - 1);
            while (!stop_.load(std::memory_order_relaxed) && end > begin + kStep) {
                const std::uintptr_t from = end - kStep;
                if (madvise(reinterpret_cast<void*>(from), kStep, MADV_POPULATE_WRITE) != 0) return;
                end = from;
            }
        });
    }
    ~BackgroundPrefault() {
        stop_.store(true, std::memory_order_relaxed);
        if (worker_.joinable()) worker_.join();
    }
    BackgroundPrefault(const BackgroundPrefault&) = delete;
    BackgroundPrefault& operator=(const BackgroundPrefault&) = delete;

private:
    std::atomic<bool> stop_{false};
    std::thread worker_;
};

}  // namespace

void gunzip_into(std::span<const std::uint8_t> compressed, std::span<std::uint8_t> out, const fs::path& file, int threads) {
    gunzip_at_least_into(compressed, out, out.size(), file, threads);
}

std::size_t gunzip_at_least_into(std::span<const std::uint8_t> compressed, std::span<std::uint8_t> out, std::size_t required,
                                 const fs::path& file, int threads) {
    const BackgroundPrefault prefault(out, threads);
    const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> decompressor(
        libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
    if (!decompressor) throw std::bad_alloc();
    std::size_t in_pos = 0, out_pos = 0;
    while (out_pos < out.size()) {
        const auto in = compressed.subspan(in_pos);
        if (!has_gzip_magic(in)) {
            if (out_pos >= required) break;
            throw FileError(file, "truncated: the compressed data holds " + std::to_string(out_pos) + " bytes, the header describes " +
                                      std::to_string(required));
        }
        const auto space = out.subspan(out_pos);
        std::size_t in_used = 0, out_written = 0;
        const libdeflate_result status =
            libdeflate_gzip_decompress_ex(decompressor.get(), in.data(), in.size(), space.data(), space.size(), &in_used, &out_written);
        if (status != LIBDEFLATE_SUCCESS) {
            // More data than wanted (zlib stops when `out` is full), or a damaged stream (zlib says how).
            const MemberResult member = inflate_member_with_zlib(in, space);
            if (!member.complete) {
                throw FileError(file, member.problem + " after " + std::to_string(out_pos + member.out_written) + " of the " +
                                          std::to_string(required) + " bytes the header describes");
            }
            in_used = member.in_used;
            out_written = member.out_written;
        }
        in_pos += in_used;
        out_pos += out_written;
    }
    return out_pos;
}

void gunzip_skipping_into(std::span<const std::uint8_t> compressed, std::uint64_t skip, std::span<std::uint8_t> out,
                          const fs::path& file) {
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw FileError(file, "cannot start decompressing");
    const std::unique_ptr<z_stream, int (*)(z_stream*)> ender(&z, inflateEnd);
    std::vector<std::uint8_t> discarded(std::size_t{1} << 16);
    std::uint64_t skipped = 0;
    std::size_t in_pos = 0, out_pos = 0;
    const std::uint64_t described = skip + out.size();
    auto position = [&] { return std::to_string(skipped + out_pos) + " of the " + std::to_string(described) + " bytes the header describes"; };
    while (out_pos < out.size()) {
        const bool skipping = skipped < skip;
        const std::size_t room = skipping ? static_cast<std::size_t>(std::min<std::uint64_t>(discarded.size(), skip - skipped))
                                          : std::min<std::size_t>(out.size() - out_pos, 1u << 30);
        if (z.avail_in == 0) {
            z.next_in = const_cast<Bytef*>(compressed.data() + in_pos);
            z.avail_in = static_cast<uInt>(std::min<std::size_t>(compressed.size() - in_pos, 1u << 30));
        }
        z.next_out = skipping ? discarded.data() : out.data() + out_pos;
        z.avail_out = static_cast<uInt>(room);
        const uInt in_before = z.avail_in;
        const int status = inflate(&z, Z_NO_FLUSH);
        in_pos += in_before - z.avail_in;
        const std::size_t produced = room - z.avail_out;
        (skipping ? skipped : out_pos) += produced;
        if (status == Z_STREAM_END) {
            // Concatenated members make one stream (as gzip -d reads them).
            if (out_pos < out.size() && !has_gzip_magic(compressed.subspan(in_pos))) {
                throw FileError(file, "truncated: the compressed data holds " + std::to_string(skipped + out_pos) +
                                          " bytes, the header describes " + std::to_string(described));
            }
            inflateReset(&z);
            z.avail_in = 0;
        } else if (status == Z_BUF_ERROR && in_pos == compressed.size()) {
            throw FileError(file, "the compressed data ends early (truncated) after " + position());
        } else if (status != Z_OK && status != Z_BUF_ERROR) {
            throw FileError(file, std::string("corrupt gzip data: ") + (z.msg ? z.msg : "invalid stream") + " after " + position());
        }
    }
}

namespace {

// Reads a raw deflate stream least significant bit first, as RFC 1951 packs it, from a 64-bit
// buffer refilled once per symbol (a symbol with its extra bits, and a distance with its, fit in
// the 56 bits a refill guarantees). Reads past the end see zero bytes; overran() tells.
class BitReader {
public:
    explicit BitReader(std::span<const std::uint8_t> data) : begin_(data.data()), next_(data.data()), end_(data.data() + data.size()) {}

    void refill() {
        if (end_ - next_ >= 8) {
            std::uint64_t word;
            std::memcpy(&word, next_, 8);  // x86-64 and AArch64 Linux are little-endian
            buffer_ |= word << count_;
            next_ += (63 - count_) >> 3;
            count_ |= 56;
            return;
        }
        while (count_ <= 56) {
            const std::uint64_t byte = next_ < end_ ? *next_ : 0;
            if (next_ >= end_) ++overrun_;
            ++next_;
            buffer_ |= byte << count_;
            count_ += 8;
        }
    }
    std::uint32_t peek(unsigned bits) const { return static_cast<std::uint32_t>(buffer_ & ((std::uint64_t{1} << bits) - 1)); }
    void skip(unsigned bits) {
        buffer_ >>= bits;
        count_ -= bits;
    }
    std::uint32_t take(unsigned bits) {  // bits <= 32, after a refill that covers them
        const std::uint32_t value = peek(bits);
        skip(bits);
        return value;
    }
    std::uint64_t position() const { return static_cast<std::uint64_t>(next_ - begin_) * 8 - count_; }
    void align_to_byte() { skip(count_ & 7); }
    // Skips whole bytes (a stored block's data): drops the buffer and moves the byte pointer.
    void skip_bytes(std::uint64_t bytes) {
        const std::uint64_t buffered = count_ / 8;  // byte aligned here
        if (bytes <= buffered) {
            skip(static_cast<unsigned>(bytes * 8));
            return;
        }
        bytes -= buffered;
        buffer_ = 0;
        count_ = 0;
        next_ = static_cast<std::uint64_t>(end_ - next_) >= bytes ? next_ + bytes : end_ + 1;
    }
    bool overran() const { return position() > static_cast<std::uint64_t>(end_ - begin_) * 8 || overrun_ > 8 || next_ > end_ + 8; }

private:
    const std::uint8_t* begin_;
    const std::uint8_t* next_;
    const std::uint8_t* end_;
    std::uint64_t buffer_ = 0;
    unsigned count_ = 0;
    unsigned overrun_ = 0;
};

constexpr std::uint8_t kLengthExtraBits[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::uint8_t kDistanceExtraBits[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

// A canonical Huffman code whose decoder also skips each symbol's extra bits (`extra`, indexed
// from `first_extra`): codes of up to kFastBits bits take one table look-up, longer ones (rare
// symbols) are decoded bit by bit.
class HuffmanDecoder {
public:
    static constexpr unsigned kFastBits = 11;

    void build(const std::uint8_t* lengths, unsigned symbols, const std::uint8_t* extra = nullptr, unsigned first_extra = 0,
               unsigned extra_count = 0) {
        extra_ = extra;
        first_extra_ = first_extra;
        extra_count_ = extra_count;
        counts_.fill(0);
        for (unsigned s = 0; s < symbols; ++s) ++counts_[lengths[s]];
        counts_[0] = 0;
        std::array<std::uint16_t, 16> offsets{};
        for (unsigned len = 1; len < 16; ++len) offsets[len] = static_cast<std::uint16_t>(offsets[len - 1] + counts_[len - 1]);
        sorted_.assign(symbols, 0);
        for (unsigned s = 0; s < symbols; ++s) {
            if (lengths[s] != 0) sorted_[offsets[lengths[s]]++] = static_cast<std::uint16_t>(s);
        }
        fast_.fill(0);
        unsigned code = 0;
        std::array<unsigned, 16> next_code{};
        for (unsigned len = 1; len < 16; ++len) {
            code = (code + counts_[len - 1]) << 1;
            next_code[len] = code;
        }
        for (unsigned s = 0; s < symbols; ++s) {
            const unsigned len = lengths[s];
            if (len == 0 || len > kFastBits) continue;
            const unsigned reversed = reverse_bits(next_code[len]++, len);
            // symbol << 6 | bits to skip (the code and the symbol's extra bits: at most 15 + 13)
            const unsigned skip = len + extra_bits(s);
            for (unsigned fill = reversed; fill < (1u << kFastBits); fill += 1u << len) {
                fast_[fill] = static_cast<std::uint16_t>((s << 6) | skip);
            }
        }
    }

    // The next symbol, its extra bits skipped; -1 for a code the table does not hold. The reader
    // must hold 15 + 13 bits.
    int decode(BitReader& bits) const {
        const std::uint16_t entry = fast_[bits.peek(kFastBits)];
        if (entry != 0) {
            bits.skip(entry & 63);
            return entry >> 6;
        }
        int code = 0, first = 0, index = 0;
        for (unsigned len = 1; len < 16; ++len) {
            code |= static_cast<int>(bits.take(1));
            const int count = counts_[len];
            if (code - count < first) {
                const int symbol = sorted_[static_cast<std::size_t>(index + (code - first))];
                bits.skip(extra_bits(static_cast<unsigned>(symbol)));
                return symbol;
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        return -1;
    }

private:
    unsigned extra_bits(unsigned symbol) const {
        return extra_ && symbol >= first_extra_ && symbol - first_extra_ < extra_count_ ? extra_[symbol - first_extra_] : 0;
    }
    static unsigned reverse_bits(unsigned code, unsigned length) {
        unsigned reversed = 0;
        for (unsigned i = 0; i < length; ++i) reversed |= ((code >> i) & 1u) << (length - 1 - i);
        return reversed;
    }

    const std::uint8_t* extra_ = nullptr;
    unsigned first_extra_ = 0, extra_count_ = 0;
    std::array<std::uint16_t, 16> counts_{};
    std::vector<std::uint16_t> sorted_;
    std::array<std::uint16_t, 1u << kFastBits> fast_{};
};

// Skips the symbols of one Huffman-coded block up to and including its end-of-block code.
bool skip_huffman_block(BitReader& bits, const HuffmanDecoder& literals, const HuffmanDecoder& distances) {
    for (;;) {
        bits.refill();
        const int symbol = literals.decode(bits);
        if (symbol < 0 || symbol > 285 || bits.overran()) return false;
        if (symbol < 256) continue;
        if (symbol == 256) return true;
        const int distance = distances.decode(bits);
        if (distance < 0 || distance > 29) return false;
    }
}

struct StreamEnd {
    std::uint64_t final_header_bit = 0;  // where the block with BFINAL set starts
    std::uint64_t end_bit = 0;           // just past its end-of-block code
};

// Walks the blocks of a complete raw deflate stream to find where its final block starts and where
// the stream ends. libdeflate has no flush, so this is how a block's stream is made non-final.
bool find_stream_end(std::span<const std::uint8_t> stream, StreamEnd& end) {
    BitReader bits(stream);
    HuffmanDecoder literals, distances, lengths_code;
    std::array<std::uint8_t, 320> lengths{};
    for (;;) {
        bits.refill();
        const std::uint64_t header = bits.position();
        const bool final_block = bits.take(1) != 0;
        const unsigned type = bits.take(2);
        if (type == 0) {
            bits.align_to_byte();
            bits.refill();
            const std::uint32_t length = bits.take(16);
            if ((bits.take(16) ^ 0xffffu) != length) return false;
            bits.skip_bytes(length);
        } else if (type == 1) {
            std::uint8_t* l = lengths.data();
            std::fill(l, l + 144, 8);
            std::fill(l + 144, l + 256, 9);
            std::fill(l + 256, l + 280, 7);
            std::fill(l + 280, l + 288, 8);
            literals.build(l, 288, kLengthExtraBits, 257, 29);
            std::fill(l, l + 30, 5);
            distances.build(l, 30, kDistanceExtraBits, 0, 30);
            if (!skip_huffman_block(bits, literals, distances)) return false;
        } else if (type == 2) {
            const unsigned literal_count = bits.take(5) + 257, distance_count = bits.take(5) + 1, code_count = bits.take(4) + 4;
            static constexpr std::uint8_t kOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
            std::array<std::uint8_t, 19> code_lengths{};
            for (unsigned i = 0; i < code_count; ++i) {
                bits.refill();
                code_lengths[kOrder[i]] = static_cast<std::uint8_t>(bits.take(3));
            }
            lengths_code.build(code_lengths.data(), 19);
            const unsigned total = literal_count + distance_count;
            unsigned i = 0;
            while (i < total) {
                bits.refill();
                const int symbol = lengths_code.decode(bits);
                if (symbol < 0 || bits.overran()) return false;
                if (symbol < 16) {
                    lengths[i++] = static_cast<std::uint8_t>(symbol);
                    continue;
                }
                unsigned repeat = 0;
                std::uint8_t value = 0;
                if (symbol == 16) {
                    if (i == 0) return false;
                    value = lengths[i - 1];
                    repeat = 3 + bits.take(2);
                } else if (symbol == 17) {
                    repeat = 3 + bits.take(3);
                } else {
                    repeat = 11 + bits.take(7);
                }
                if (i + repeat > total) return false;
                std::fill_n(lengths.begin() + i, repeat, value);
                i += repeat;
            }
            literals.build(lengths.data(), literal_count, kLengthExtraBits, 257, 29);
            distances.build(lengths.data() + literal_count, distance_count, kDistanceExtraBits, 0, 30);
            if (!skip_huffman_block(bits, literals, distances)) return false;
        } else {
            return false;
        }
        if (bits.overran()) return false;
        if (final_block) {
            end.final_header_bit = header;
            end.end_bit = bits.position();
            return true;
        }
    }
}

struct CompressedBlock {
    std::vector<std::uint8_t> bytes;
    std::size_t size = 0;
    std::uint32_t check = 0;   // CRC-32 (gzip) or Adler-32 (zlib) of the input
    std::uint64_t length = 0;  // of the input
    bool ok = true;
};

// Clears the final block's BFINAL bit and appends an empty stored block, which ends the data
// on a byte boundary, so that the next block's stream can follow it (zlib's Z_SYNC_FLUSH marker).
bool make_non_final(CompressedBlock& block) {
    StreamEnd end;
    if (!find_stream_end(std::span<const std::uint8_t>(block.bytes.data(), block.size), end)) return false;
    std::uint8_t* bytes = block.bytes.data();
    bytes[end.final_header_bit >> 3] &= static_cast<std::uint8_t>(~(1u << (end.final_header_bit & 7)));
    const std::uint64_t marker_end = end.end_bit + 3;  // BFINAL = 0, BTYPE = 00
    const std::size_t aligned = static_cast<std::size_t>((marker_end + 7) >> 3);
    if (end.end_bit & 7) bytes[end.end_bit >> 3] &= static_cast<std::uint8_t>((1u << (end.end_bit & 7)) - 1);
    for (std::size_t i = static_cast<std::size_t>((end.end_bit + 7) >> 3); i < aligned; ++i) bytes[i] = 0;
    const std::uint8_t empty_stored[4] = {0x00, 0x00, 0xff, 0xff};
    std::memcpy(bytes + aligned, empty_stored, 4);
    block.size = aligned + 4;
    return true;
}

}  // namespace

libdeflate_compressor* thread_compressor(int level) {
    struct Compressors {
        std::array<libdeflate_compressor*, kMaxCompressionLevel + 1> by_level{};
        ~Compressors() {
            for (libdeflate_compressor* compressor : by_level) libdeflate_free_compressor(compressor);
        }
    };
    thread_local Compressors compressors;
    libdeflate_compressor*& compressor = compressors.by_level[static_cast<std::size_t>(std::clamp(level, kMinCompressionLevel, kMaxCompressionLevel))];
    if (compressor == nullptr) compressor = libdeflate_alloc_compressor(level);
    if (compressor == nullptr) throw std::bad_alloc();
    return compressor;
}

int resolve_compression_level(int requested, std::span<const std::uint8_t> sample) {
    if (requested >= 0) return std::clamp(requested, kMinCompressionLevel, kMaxCompressionLevel);
    if (sample.empty()) return kDefaultCompressionLevel;
    sample = sample.first(std::min<std::size_t>(sample.size(), kLevelTrialBytes));
    const auto compressed_size = [&](int level) {
        libdeflate_compressor* compressor = thread_compressor(level);
        std::vector<std::uint8_t> out(libdeflate_deflate_compress_bound(compressor, sample.size()));
        return static_cast<double>(libdeflate_deflate_compress(compressor, sample.data(), sample.size(), out.data(), out.size()));
    };
    const double fast = compressed_size(kFastCompressionLevel), standard = compressed_size(kDefaultCompressionLevel);
    return standard > fast * (1.0 - kDefaultLevelGain) ? kFastCompressionLevel : kDefaultCompressionLevel;
}

void deflate_compress(const BlockSource& source, int level, int threads, DeflateContainer container,
                      const std::function<void(std::span<const std::uint8_t>)>& sink) {
    level = std::clamp(level, kMinCompressionLevel, kMaxCompressionLevel);
    const std::uint64_t block_count = source.sizes.size();
    const std::uint64_t largest = block_count == 0 ? 0 : *std::max_element(source.sizes.begin(), source.sizes.end());
    const int workers = static_cast<int>(std::clamp<std::uint64_t>(block_count, 1, static_cast<std::uint64_t>(threads > 0 ? threads : omp_get_max_threads())));
    const bool gzip = container == DeflateContainer::Gzip;

    if (gzip) {
        static constexpr std::uint8_t kHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // deflate, no name, no time, Unix
        sink(kHeader);
    } else {
        // RFC 1950: deflate with a 32 KiB window; FLEVEL tells readers how hard the writer tried.
        const unsigned flevel = level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
        const unsigned header = 0x7800u | (flevel << 6);
        const std::uint8_t bytes[2] = {0x78, static_cast<std::uint8_t>((flevel << 6) | (31 - header % 31) % 31)};
        sink(bytes);
    }

    const std::size_t bound = libdeflate_deflate_compress_bound(thread_compressor(level), static_cast<std::size_t>(largest)) + 8;
    // A pipeline without rounds: each worker takes the next block, compresses it, and whoever
    // completes the block due next writes it and every completed block after it, in order. At most
    // `window` blocks are taken but not yet written, so memory stays bounded whatever the size,
    // and no worker waits for the slowest block of a round (rounds with a barrier each cost the
    // int16 head about 5 % of its writing time).
    const std::uint64_t window = std::max<std::uint64_t>(1, std::min<std::uint64_t>(static_cast<std::uint64_t>(workers) * 4, block_count));
    std::vector<CompressedBlock> slots(static_cast<std::size_t>(window));
    std::vector<char> completed(static_cast<std::size_t>(window), 0);
    std::vector<std::vector<std::uint8_t>> scratch(static_cast<std::size_t>(workers));
    for (auto& block : slots) block.bytes.resize(bound);
    std::mutex mutex;
    std::condition_variable progress;
    std::uint64_t next_to_take = 0, next_to_write = 0, total = 0;
    // The source's or the sink's exception, or the internal join error: no worker goes on.
    std::exception_ptr failure;
    std::uint32_t check = gzip ? 0 : 1;  // CRC-32 or Adler-32 of everything compressed so far
#pragma omp parallel num_threads(workers)
    {
        const int worker = omp_get_thread_num();
        for (;;) {
            std::uint64_t b = 0;
            {
                std::unique_lock lock(mutex);
                progress.wait(lock, [&] { return failure || next_to_take == block_count || next_to_take < next_to_write + window; });
                if (failure || next_to_take == block_count) break;
                b = next_to_take++;
            }
            CompressedBlock& block = slots[static_cast<std::size_t>(b % window)];
            try {
                const auto input = source.checked_bytes(b, scratch[static_cast<std::size_t>(worker)]);
                block.size = libdeflate_deflate_compress(thread_compressor(level), input.data(), input.size(), block.bytes.data(), bound - 8);
                block.check = static_cast<std::uint32_t>(gzip ? libdeflate_crc32(0, input.data(), input.size())
                                                          : libdeflate_adler32(1, input.data(), input.size()));
                block.length = input.size();
                block.ok = block.size > 0 && (b + 1 == block_count || make_non_final(block));
            } catch (...) {
                std::unique_lock lock(mutex);
                if (!failure) failure = std::current_exception();
                progress.notify_all();
                break;
            }
            std::unique_lock lock(mutex);
            completed[static_cast<std::size_t>(b % window)] = 1;
            try {
                while (!failure && next_to_write < block_count && completed[static_cast<std::size_t>(next_to_write % window)]) {
                    const std::size_t slot = static_cast<std::size_t>(next_to_write % window);
                    const CompressedBlock& due = slots[slot];
                    if (!due.ok) throw std::runtime_error("deflate: a compressed block could not be joined to the next (internal error)");
                    const auto length = static_cast<z_off_t>(due.length);
                    check = next_to_write == 0 ? due.check
                            : static_cast<std::uint32_t>(gzip ? crc32_combine(check, due.check, length) : adler32_combine(check, due.check, length));
                    total += due.length;
                    sink(std::span<const std::uint8_t>(due.bytes.data(), due.size));
                    completed[slot] = 0;
                    ++next_to_write;
                }
            } catch (...) {
                failure = std::current_exception();
            }
            progress.notify_all();
        }
    }
    if (failure) std::rethrow_exception(failure);
    if (block_count == 0) {
        // No block: an empty deflate stream (one final stored block of no bytes).
        static constexpr std::uint8_t kEmpty[5] = {0x01, 0x00, 0x00, 0xff, 0xff};
        sink(kEmpty);
    }
    if (!gzip) {
        const std::uint8_t trailer[4] = {static_cast<std::uint8_t>(check >> 24), static_cast<std::uint8_t>(check >> 16),
                                         static_cast<std::uint8_t>(check >> 8), static_cast<std::uint8_t>(check)};
        sink(trailer);
        return;
    }
    std::uint8_t trailer[8];
    for (int i = 0; i < 4; ++i) trailer[i] = static_cast<std::uint8_t>(check >> (8 * i));
    for (int i = 0; i < 4; ++i) trailer[4 + i] = static_cast<std::uint8_t>(total >> (8 * i));
    sink(trailer);
}

void gzip_compress(const BlockSource& source, int level, int threads, const std::function<void(std::span<const std::uint8_t>)>& sink) {
    deflate_compress(source, level, threads, DeflateContainer::Gzip, sink);
}

BlockSource blocks_of(const std::vector<std::span<const std::uint8_t>>& pieces, std::uint64_t block_bytes) {
    std::uint64_t total = 0;
    for (const auto& piece : pieces) total += piece.size();
    BlockSource source;
    std::uint64_t begin = 0;
    do {  // (no bytes: one empty block)
        source.sizes.push_back(std::min(block_bytes, total - begin));
        begin += block_bytes;
    } while (begin < total);
    // The bytes of block b, pointing into a piece where it lies inside one, else copied into `scratch`.
    source.bytes = [pieces, total, block_bytes](std::uint64_t b, std::vector<std::uint8_t>& scratch) -> std::span<const std::uint8_t> {
        const std::uint64_t begin = b * block_bytes, end = std::min<std::uint64_t>(total, begin + block_bytes);
        std::uint64_t piece_start = 0;
        for (const auto& piece : pieces) {
            const std::uint64_t piece_end = piece_start + piece.size();
            if (begin >= piece_start && end <= piece_end) return piece.subspan(begin - piece_start, end - begin);
            piece_start = piece_end;
        }
        scratch.resize(end - begin);
        piece_start = 0;
        for (const auto& piece : pieces) {
            const std::uint64_t piece_end = piece_start + piece.size();
            const std::uint64_t from = std::max(begin, piece_start), to = std::min(end, piece_end);
            if (from < to) std::memcpy(scratch.data() + (from - begin), piece.data() + (from - piece_start), to - from);
            piece_start = piece_end;
        }
        return scratch;
    };
    return source;
}

void gzip_compress(const std::vector<std::span<const std::uint8_t>>& pieces, int level, int threads,
                   const std::function<void(std::span<const std::uint8_t>)>& sink) {
    gzip_compress(blocks_of(pieces, kGzipBlockBytes), level, threads, sink);
}

void write_pieces(const StagedFile& staged, const std::vector<std::span<const std::uint8_t>>& pieces, bool compress,
                  const WriteOptions& options) {
    OutputFile out(staged);
    if (compress) {
        const BlockSource blocks = blocks_of(pieces, kGzipBlockBytes);
        std::uint64_t total = 0;
        for (const std::uint64_t size : blocks.sizes) total += size;
        std::vector<std::uint8_t> scratch;
        const std::span<const std::uint8_t> trial =
            total >= kLevelTrialMinBytes ? blocks.checked_bytes(blocks.sizes.size() / 2, scratch) : std::span<const std::uint8_t>();
        const int level = resolve_compression_level(options.compression_level, trial);
        gzip_compress(pieces, level, options.threads, [&](std::span<const std::uint8_t> bytes) { out.write(bytes); });
    } else {
        for (const auto& piece : pieces) out.write(piece);
    }
    out.close();
}

}  // namespace gridwarp::io::detail
