// Typed exceptions for every failure the library reports; only app/ mains catch them.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace gpt {

// Base of every error this project throws on purpose.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The user asked for something impossible (bad flag, key, value or combination): exit 2.
class UsageError : public Error {
public:
    using Error::Error;
};

// A file is missing, unreadable, unwritable or fails validation.
class IoError : public Error {
public:
    using Error::Error;
};

// Input data is malformed (JSON, UTF-8, dataset index, checkpoint contents).
class DataError : public Error {
public:
    using Error::Error;
};

// Training produced a non-finite value where none is allowed.
class NumericError : public Error {
public:
    using Error::Error;
};

// Communication (MPI, NCCL) failed.
class CommError : public Error {
public:
    using Error::Error;
};

// A device API (CUDA, cuBLASLt) failed.
class DeviceError : public Error {
public:
    using Error::Error;
};

// An invariant of the code itself broke: a bug, not a user error.
class InternalError : public Error {
public:
    using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}
}  // namespace detail

}  // namespace gpt

// GPT_THROW(UsageError, "heads ", h, " not divisible by TP ", tp)
#define GPT_THROW(Type, ...) throw ::gpt::Type(::gpt::detail::concat(__VA_ARGS__))

// Release-mode invariant check; names the file and line because it reports a bug.
#define GPT_ASSERT(cond, ...)                                                              \
    do {                                                                                   \
        if (!(cond))                                                                       \
            throw ::gpt::InternalError(::gpt::detail::concat(                              \
                __FILE__, ":", __LINE__, ": assertion '", #cond, "' failed. ", ##__VA_ARGS__)); \
    } while (0)

// User-facing precondition: throws Type with the message when cond is false.
#define GPT_REQUIRE(cond, Type, ...)                                                       \
    do {                                                                                   \
        if (!(cond)) GPT_THROW(Type, __VA_ARGS__);                                         \
    } while (0)
