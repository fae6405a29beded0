/* An LD_PRELOAD library that makes the storage under one folder fail, for the write-fault tests
 * (tests/reliability/test_write_faults.py): errors a tmpfs cannot produce on demand.
 *
 *   GRIDWARP_FAULT_FOLDER  absolute path; only files below it fail
 *   GRIDWARP_FAULT_ERRNO   the error number to fail with (5 = EIO, 122 = EDQUOT)
 *   GRIDWARP_FAULT_AT      "write": every write, positioned write, gathered write, stdio write and
 *                          block reservation fails, as a failing disk does;
 *                          "close": closing fails after the data went through, as an NFS client
 *                          reports a quota or a server's write error only at close.
 *
 * Every other call, and every file outside the folder, goes to the C library unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int fault_errno(const char* at) {
    const char* wanted = getenv("GRIDWARP_FAULT_AT");
    const char* number = getenv("GRIDWARP_FAULT_ERRNO");
    if (!wanted || !number || strcmp(wanted, at) != 0) return 0;
    return atoi(number);
}

/* Whether descriptor FD is a file below GRIDWARP_FAULT_FOLDER. */
static int under_fault_folder(int fd) {
    const char* folder = getenv("GRIDWARP_FAULT_FOLDER");
    if (!folder || fd < 0) return 0;
    char link[64];
    char target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = '\0';
    const size_t length = strlen(folder);
    return strncmp(target, folder, length) == 0 && (target[length] == '/' || target[length] == '\0');
}

/* The error to fail a call AT on FD with, or 0 to let it through. */
static int injected(const char* at, int fd) {
    const int error = fault_errno(at);
    return error != 0 && under_fault_folder(fd) ? error : 0;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buffer, size_t count) {
    const int error = injected("write", fd);
    if (error) {
        errno = error;
        return -1;
    }
    return NEXT(write)(fd, buffer, count);
}

ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
    const int error = injected("write", fd);
    if (error) {
        errno = error;
        return -1;
    }
    return NEXT(pwrite)(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t count, off64_t offset) {
    const int error = injected("write", fd);
    if (error) {
        errno = error;
        return -1;
    }
    return NEXT(pwrite64)(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec* pieces, int count) {
    const int error = injected("write", fd);
    if (error) {
        errno = error;
        return -1;
    }
    return NEXT(writev)(fd, pieces, count);
}

int posix_fallocate(int fd, off_t offset, off_t length) {
    const int error = injected("write", fd);
    return error ? error : NEXT(posix_fallocate)(fd, offset, length);
}

int posix_fallocate64(int fd, off64_t offset, off64_t length) {
    const int error = injected("write", fd);
    return error ? error : NEXT(posix_fallocate64)(fd, offset, length);
}

size_t fwrite(const void* buffer, size_t size, size_t count, FILE* stream) {
    const int error = injected("write", fileno(stream));
    if (error) {
        errno = error;
        return 0;
    }
    return NEXT(fwrite)(buffer, size, count, stream);
}

int close(int fd) {
    const int error = injected("close", fd);
    const int result = NEXT(close)(fd);
    if (error && result == 0) {
        errno = error;
        return -1;
    }
    return result;
}

int fclose(FILE* stream) {
    const int error = injected("close", fileno(stream));
    const int result = NEXT(fclose)(stream);
    if (error && result == 0) {
        errno = error;
        return EOF;
    }
    return result;
}
