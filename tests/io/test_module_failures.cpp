// The module boundary (lib/io/src/modules/backends.hpp): what a module's reader throws comes back
// as a value and is thrown again in the program as the same kind, with the same message and file.
#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>
#include <string>

#include "gridwarp/io/error.hpp"
#include "modules/backends.hpp"  // lib/io/src: internal

namespace io = gridwarp::io;
using io::detail::failure_of;
using io::detail::ModuleFailure;
using io::detail::throw_if_failed;

TEST_CASE("module failures: each kind is thrown again as itself, message and file kept", "[io][modules]") {
    SECTION("a call that returns is no failure") {
        int calls = 0;
        const ModuleFailure failure = failure_of([&] { ++calls; });
        CHECK(calls == 1);
        CHECK(failure.kind == ModuleFailure::Kind::None);
        CHECK_NOTHROW(throw_if_failed(failure));
    }
    SECTION("FileError") {
        const ModuleFailure failure = failure_of([] { throw io::FileError("/data/t1.nrrd", "ITK: unknown pixel type"); });
        CHECK(failure.kind == ModuleFailure::Kind::File);
        try {
            throw_if_failed(failure);
            FAIL("nothing thrown");
        } catch (const io::FileError& error) {
            CHECK(error.file() == "/data/t1.nrrd");
            CHECK(std::string(error.what()) == "/data/t1.nrrd: ITK: unknown pixel type");
        }
    }
    SECTION("std::invalid_argument") {
        const ModuleFailure failure = failure_of([] { throw std::invalid_argument("dimension 5 is not 2 or 3"); });
        CHECK_THROWS_MATCHES(throw_if_failed(failure), std::invalid_argument, Catch::Message("dimension 5 is not 2 or 3"));
    }
    SECTION("std::bad_alloc") {
        CHECK_THROWS_AS(throw_if_failed(failure_of([] { throw std::bad_alloc(); })), std::bad_alloc);
    }
    SECTION("any other exception keeps its message") {
        const ModuleFailure failure = failure_of([] { throw std::out_of_range("tag 274 out of range"); });
        CHECK_THROWS_MATCHES(throw_if_failed(failure), std::runtime_error, Catch::Message("tag 274 out of range"));
        CHECK_THROWS_AS(throw_if_failed(failure_of([] { throw 42; })), std::runtime_error);
    }
}
