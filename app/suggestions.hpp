// Suggestions for mistyped words: commands, options and option values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gridwarp::cli {

// The known word nearest a typed one, if near enough to be what was meant (a third of its letters,
// at least two), or one the typed word begins; empty otherwise.
std::string nearest_word(std::string_view typed, const std::vector<std::string>& known);
// " (did you mean 'WORD'?)" for nearest_word's answer, or nothing.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace gridwarp::cli
