// Work items shared out among the threads of a parallel region, each thread owning one contiguous
// share (its slice of the output) and stealing from the others only once its own share is done.
//
// Why not OpenMP's schedule(dynamic): a dynamic schedule hands the same tile to a different thread
// from one call to the next, so a caller that samples into the same output again (frames of a video,
// an inference loop, a benchmark's repetitions) has each thread overwrite cache lines that the other
// core last wrote, and every such line crosses between the cores' caches (docs/performance.md,
// "Tuning choices"). A static schedule keeps the ownership but leaves a thread idle when its slice
// is cheap (mostly outside the input, say); stealing from the back of the fullest share keeps the
// balance of a dynamic schedule.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gridwarp {

class WorkSplit {
public:
    // Items 0..count-1 in `shares` contiguous shares of (nearly) equal length, share t for thread t.
    WorkSplit(std::int64_t count, int shares)
        : share_count_(std::max(shares, 1)), shares_(std::make_unique<Share[]>(static_cast<std::size_t>(share_count_))) {
        for (int t = 0; t < share_count_; ++t) {
            shares_[t].front.store(count * t / share_count_, std::memory_order_relaxed);
            shares_[t].back.store(count * (t + 1) / share_count_, std::memory_order_relaxed);
        }
    }

    // The next item for thread `me` (0 <= me < shares): the front of its own share, else the back
    // of the share with the most items left; -1 when every item has been handed out. A team with
    // fewer threads than shares still gets every item (the shares without a thread are stolen).
    std::int64_t next(int me) {
        if (me >= 0 && me < share_count_) {
            const std::int64_t item = shares_[me].take_front();
            if (item >= 0) return item;
        }
        for (;;) {
            int fullest = -1;
            std::int64_t most = 0;
            for (int t = 0; t < share_count_; ++t) {
                const std::int64_t left = shares_[t].left();
                if (left > most) most = left, fullest = t;
            }
            if (fullest < 0) return -1;
            const std::int64_t item = shares_[fullest].take_back();
            if (item >= 0) return item;  // (else another thread emptied it first: look again)
        }
    }

private:
    // One cache line per share, so that owners taking items do not contend for a line.
    struct alignas(64) Share {
        std::mutex lock;  // front and back change together under the lock; left() only estimates
        std::atomic<std::int64_t> front{0}, back{0};

        std::int64_t take_front() {
            std::lock_guard<std::mutex> guard(lock);
            const std::int64_t f = front.load(std::memory_order_relaxed);
            if (f >= back.load(std::memory_order_relaxed)) return -1;
            front.store(f + 1, std::memory_order_relaxed);
            return f;
        }
        std::int64_t take_back() {
            std::lock_guard<std::mutex> guard(lock);
            const std::int64_t b = back.load(std::memory_order_relaxed);
            if (front.load(std::memory_order_relaxed) >= b) return -1;
            back.store(b - 1, std::memory_order_relaxed);
            return b - 1;
        }
        std::int64_t left() const { return back.load(std::memory_order_relaxed) - front.load(std::memory_order_relaxed); }
    };

    int share_count_;
    std::unique_ptr<Share[]> shares_;
};

}  // namespace gridwarp
