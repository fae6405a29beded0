// The man page and the bash and zsh completions, written from the program's own option definitions
// (the CLI11 tree), so that they list exactly what the commands accept. `cmake --install` installs
// what `gridwarp help --man` / `--bash-completion` / `--zsh-completion` print.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace gridwarp::cli {

// gridwarp(1) in roff (man(7) macros): every command, its options by group, exit statuses.
std::string man_page(const CLI::App& app);
// A bash completion script: commands, each command's options, the values of options with a fixed
// set (modes, padding, ...), file names elsewhere.
std::string bash_completion(const CLI::App& app);
// A zsh completion script (#compdef gridwarp) with the same content, through _arguments.
std::string zsh_completion(const CLI::App& app);

}  // namespace gridwarp::cli
