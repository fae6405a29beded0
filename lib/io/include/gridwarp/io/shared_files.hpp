// Files that many jobs of one process share (a reference grid, a transform, a displacement field):
// read once and handed out again while the file is unchanged on disk (same size and modification
// time), within a memory budget. Off until enabled: gridwarp batch enables it; a single command
// reads its files itself.
#pragma once

#include <cstddef>

namespace gridwarp::io {

void enable_shared_files(std::size_t budget_bytes);
// Reads answered from the shared files so far.
std::size_t shared_file_hits();

}  // namespace gridwarp::io
