// The translation unit that compiles tests/common/test_pch.hpp into the precompiled header
// the test binaries reuse (cmake/GptTesting.cmake); it has no code of its own.
