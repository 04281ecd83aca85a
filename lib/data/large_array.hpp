// An uninitialised array of a trivial type for start-up's large index arrays (tens of MB for a
// split of millions of documents). std::vector would zero every byte before the builder writes
// it, and the first touch of each 4 KB page is a page fault: a 26 MB array took 6,500 of them
// plus the memset. Arrays of 2 MB or more are aligned to 2 MB and advised for transparent huge
// pages (Linux's default THP mode is "madvise", which needs the advice), one fault per 2 MB.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace gpt::data {

template <typename T>
class LargeArray {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

public:
    LargeArray() = default;
    explicit LargeArray(std::size_t n) : size_(n) {
        constexpr std::size_t kHuge = std::size_t{2} << 20;
        const std::size_t bytes = n * sizeof(T);
        if (bytes >= kHuge) {
            const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
            data_.reset(static_cast<T*>(std::aligned_alloc(kHuge, rounded)));
            // Advice only: without THP (or with it off) the pages are ordinary ones.
            if (data_) (void)madvise(data_.get(), rounded, MADV_HUGEPAGE);
        } else if (n > 0) {
            data_.reset(static_cast<T*>(std::malloc(bytes)));
        }
        if (n > 0 && !data_) throw std::bad_alloc();
    }
    T* data() { return data_.get(); }
    const T* data() const { return data_.get(); }
    std::size_t size() const { return size_; }
    T& operator[](std::size_t i) { return data_.get()[i]; }
    const T& operator[](std::size_t i) const { return data_.get()[i]; }

private:
    struct Free {
        void operator()(T* p) const { std::free(p); }
    };
    std::unique_ptr<T, Free> data_;
    std::size_t size_ = 0;
};

}  // namespace gpt::data
