// What the fuzz targets found, checked in every build as plain tests (the committed inputs
// under regressions/ replay them too, but a memory error only shows under the sanitizers).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"
#include "test_env.hpp"

namespace {

using namespace gpt;
using namespace gpt::ckpt;

// A one-tensor checkpoint whose root gets an extra attribute of `type` over `dims` values.
std::string checkpoint_with_attribute(const std::string& name, hid_t type, std::vector<hsize_t> dims,
                                      const void* values) {
    const std::string dir = test::scratch_dir(name);
    std::vector<float> w(4, 1.0f);
    {
        CheckpointWriter writer(MPI_COMM_SELF, dir, 3);
        writer.write({{"w", {4}, DType::F32, Selection::all(), w.data()}});
        writer.commit();
    }
    const std::string file = checkpoint_file(dir, 3).string();
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t space = dims.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t a = H5Acreate2(f, "consumed_train_samples", type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (values) H5Awrite(a, type, values);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
    return file;
}

void expect_rejected(const std::string& file, const std::string& what) {
    try {
        CheckpointReader reader(MPI_COMM_SELF, file);
        ADD_FAILURE() << "opened a checkpoint whose attribute holds " << what;
    } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("attribute 'consumed_train_samples' holds"), std::string::npos) << e.what();
    }
}

// fuzz_ckpt: an array attribute was read into one int64 (stack overflow in read_attributes).
TEST(FuzzFindings, CheckpointArrayAttributeIsRejected) {
    const std::int64_t four[4] = {1, 2, 3, 4};
    expect_rejected(checkpoint_with_attribute("fuzz_array_attr", H5T_NATIVE_INT64, {4}, four), "4 integers");
}

TEST(FuzzFindings, CheckpointStringArrayAttributeIsRejected) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    const char* two[2] = {"a", "b"};
    expect_rejected(checkpoint_with_attribute("fuzz_string_array_attr", t, {2}, two), "2 strings");
    H5Tclose(t);
}

// A NULL dataspace (no value at all) read as 0 before.
TEST(FuzzFindings, CheckpointEmptyAttributeIsRejected) {
    expect_rejected(checkpoint_with_attribute("fuzz_null_attr", H5T_NATIVE_DOUBLE, {}, nullptr), "no value");
}

// fuzz_indexed: an empty int32 sequence passed a null pointer to memcpy (UBSan). Its
// reads must give nothing and not touch memory.
TEST(FuzzFindings, EmptyInt32SequenceReads) {
    const std::string prefix = test::scratch_dir("fuzz_empty_i32") + "/ds";
    {
        data::IndexedDatasetWriter w(prefix, data::TokenDType::I32);
        const std::int32_t ids[2] = {7, 8};
        w.add_sequence(ids);
        w.add_sequence({});
        w.end_document();
        w.finalize();
    }
    data::IndexedDataset ds(prefix);
    ASSERT_EQ(ds.num_sequences(), 2);
    EXPECT_TRUE(ds.sequence(1).empty());
    EXPECT_EQ(ds.sequence(0), (std::vector<std::int32_t>{7, 8}));
}

}  // namespace
