#include "suggestions.hpp"

#include <algorithm>

namespace gridwarp::cli {

namespace {

// Edits (insertions, deletions, substitutions, swaps of neighbours) between two words.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_word(std::string_view typed, const std::vector<std::string>& known) {
    std::string best;
    std::size_t best_distance = std::max<std::size_t>(2, typed.size() / 3) + 1;
    for (const std::string& word : known) {
        const std::size_t distance = word.starts_with(typed) && typed.size() >= 3 ? 1 : edit_distance(typed, word);
        if (distance < best_distance) {
            best = word;
            best_distance = distance;
        }
    }
    return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known) {
    const std::string near = nearest_word(typed, known);
    return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

}  // namespace gridwarp::cli
