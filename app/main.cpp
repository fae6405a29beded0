// gridwarp: exact grid sampling of images, volumes and tensors from the command line.
#include "command_line.hpp"

int main(int argc, char** argv) { return gridwarp::cli::run_command_line(argc, argv, GRIDWARP_VERSION); }
