// Damage planted in an HDF5 checkpoint for the tests that must see it rejected: bits of
// one stored byte flipped in place, the file otherwise intact (as a bad disk would leave it).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace gpt::test {

// The file offset of a contiguous dataset's data (HADDR_UNDEF when it has none).
inline haddr_t dataset_offset(const std::string& file, const char* dataset) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    const haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    return off;
}

// XORs byte `byte` of dataset's data with `mask`. Call on one rank, with no reader open.
inline void flip_dataset_bits(const std::string& file, const char* dataset, std::int64_t byte,
                              unsigned char mask) {
    const haddr_t off = dataset_offset(file, dataset);
    ASSERT_NE(off, HADDR_UNDEF) << dataset << " in " << file;
    const auto at = static_cast<std::streamoff>(off) + static_cast<std::streamoff>(byte);
    std::fstream s(file, std::ios::in | std::ios::out | std::ios::binary);
    s.seekg(at);
    char c = 0;
    s.read(&c, 1);
    c = static_cast<char>(c ^ static_cast<char>(mask));
    s.seekp(at);
    s.write(&c, 1);
}

}  // namespace gpt::test
