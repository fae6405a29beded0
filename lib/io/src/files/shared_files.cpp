#include "gridwarp/io/shared_files.hpp"

#include <sys/stat.h>

#include <atomic>
#include <list>
#include <map>
#include <mutex>

#include "files/shared_files_internal.hpp"

namespace gridwarp::io::detail {

namespace {

struct Entry {
    std::string key;
    std::any value;
    std::size_t bytes = 0;
};

struct Cache {
    std::mutex mutex;
    std::size_t budget = 0;
    std::size_t used = 0;
    std::list<Entry> entries;  // most recently used first
    std::map<std::string, std::list<Entry>::iterator> index;
};

Cache& cache() {
    static Cache instance;
    return instance;
}

std::atomic<bool> enabled{false};
std::atomic<std::size_t> hits{0};

}  // namespace

std::optional<std::string> shared_file_key(const std::filesystem::path& file, const std::string& what) {
    if (!enabled.load()) return std::nullopt;
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) return std::nullopt;
    std::error_code error;
    const auto canonical = std::filesystem::weakly_canonical(file, error);
    if (error) return std::nullopt;
    return what + "|" + canonical.string() + "|" + std::to_string(info.st_size) + "|" + std::to_string(info.st_mtim.tv_sec) + "." +
           std::to_string(info.st_mtim.tv_nsec);
}

std::optional<std::any> shared_file_find(const std::string& key) {
    Cache& c = cache();
    const std::lock_guard<std::mutex> lock(c.mutex);
    const auto found = c.index.find(key);
    if (found == c.index.end()) return std::nullopt;
    c.entries.splice(c.entries.begin(), c.entries, found->second);
    ++hits;
    return found->second->value;
}

void shared_file_store(const std::string& key, std::any value, std::size_t bytes) {
    Cache& c = cache();
    const std::lock_guard<std::mutex> lock(c.mutex);
    if (bytes > c.budget || c.index.count(key)) return;
    while (c.used + bytes > c.budget && !c.entries.empty()) {
        c.used -= c.entries.back().bytes;
        c.index.erase(c.entries.back().key);
        c.entries.pop_back();
    }
    c.entries.push_front(Entry{key, std::move(value), bytes});
    c.index[key] = c.entries.begin();
    c.used += bytes;
}

}  // namespace gridwarp::io::detail

namespace gridwarp::io {

void enable_shared_files(std::size_t budget_bytes) {
    detail::Cache& c = detail::cache();
    {
        const std::lock_guard<std::mutex> lock(c.mutex);
        c.budget = budget_bytes;
    }
    detail::enabled = budget_bytes > 0;
}

std::size_t shared_file_hits() { return detail::hits.load(); }

}  // namespace gridwarp::io
