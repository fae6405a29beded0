// WorkSplit (lib/core/src/work_split.hpp): every item handed out exactly once, owners first.
#include "work_split.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

using gridwarp::WorkSplit;

namespace {

std::vector<std::int64_t> drain(WorkSplit& split, int me) {
    std::vector<std::int64_t> items;
    for (std::int64_t item = split.next(me); item >= 0; item = split.next(me)) items.push_back(item);
    return items;
}

}  // namespace

TEST_CASE("WorkSplit: a lone thread takes its own share in order, then the others' from their backs", "[work_split]") {
    WorkSplit split(10, 2);  // shares [0, 5) and [5, 10)
    const std::vector<std::int64_t> expected = {0, 1, 2, 3, 4, 9, 8, 7, 6, 5};
    CHECK(drain(split, 0) == expected);
    CHECK(split.next(1) == -1);
}

TEST_CASE("WorkSplit: a thread steals from the share with the most left", "[work_split]") {
    WorkSplit split(9, 3);  // [0, 3), [3, 6), [6, 9)
    CHECK(split.next(2) == 6);
    CHECK(split.next(2) == 7);
    CHECK(split.next(2) == 8);
    CHECK(split.next(0) == 0);  // share 0 now has 2 left, share 1 has 3
    CHECK(split.next(2) == 5);  // the back of share 1
    CHECK(split.next(2) == 2);  // shares 0 and 1 both have 2 left: the first of them
    CHECK(split.next(2) == 4);  // share 0 has 1 left, share 1 has 2
    CHECK(split.next(0) == 1);
    CHECK(split.next(0) == 3);
    CHECK(split.next(1) == -1);
}

TEST_CASE("WorkSplit: every item once, for any count, share count and team", "[work_split]") {
    for (const std::int64_t count : {0, 1, 2, 3, 7, 64, 1001}) {
        for (const int shares : {1, 2, 3, 8}) {
            for (const int team : {1, shares, shares + 2}) {  // fewer, as many, and more threads than shares
                INFO("count " << count << ", shares " << shares << ", threads " << team);
                WorkSplit split(count, shares);
                std::vector<std::vector<std::int64_t>> taken(static_cast<std::size_t>(team));
                std::vector<std::thread> threads;
                for (int t = 0; t < team; ++t) threads.emplace_back([&, t] { taken[static_cast<std::size_t>(t)] = drain(split, t); });
                for (auto& thread : threads) thread.join();
                std::vector<std::int64_t> all;
                for (const auto& items : taken) all.insert(all.end(), items.begin(), items.end());
                std::sort(all.begin(), all.end());
                std::vector<std::int64_t> expected(static_cast<std::size_t>(count));
                for (std::int64_t i = 0; i < count; ++i) expected[static_cast<std::size_t>(i)] = i;
                CHECK(all == expected);
            }
        }
    }
}
