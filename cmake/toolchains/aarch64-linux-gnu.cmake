# Cross-compiling for 64-bit ARM with Debian's cross toolchain (g++-aarch64-linux-gnu); tests run
# through qemu-aarch64 with the target's libraries (scripts/check-aarch64.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
# Catch2 and nlohmann-json are header-only and install their CMake packages for every architecture.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The programs run on Debian's arm64 libraries (multiarch: loader, libc, libstdc++, libgomp and
# Highway from one release), not the cross toolchain's copies: a loader of one build with a libc of
# another hung OpenMP programs.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
