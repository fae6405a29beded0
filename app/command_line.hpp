// The gridwarp program's command line, apart from main.cpp so that main.cpp needs no CLI11 and the
// commands compile as a few unity units (app/CMakeLists.txt).
#pragma once

namespace gridwarp::cli {

// Parses the command line, runs the command and returns the exit status (docs/cli.md); every
// failure is one line on stderr.
int run_command_line(int argc, char** argv, const char* version);

}  // namespace gridwarp::cli
