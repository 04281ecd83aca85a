// CheckpointReader::read, step 2: the reads, as planned (read_plan.cpp), into the caller's
// buffers, with this rank's checksum contributions summed on the side while the bytes are
// still in the cache. Settling the checksums is step 3 (read_verify.cpp).
#include <deque>

#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/collective.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/direct_reads.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/reader_impl.hpp"
#include "ckpt/strided_exchange.hpp"
#include "core/half.hpp"

namespace gpt::ckpt {

namespace {
// Converts n packed elements between the float storage types through fp32.
void convert_elements(DType from, const void* src, DType to, void* dst, std::size_t n) {
    auto load = [&](std::size_t i) -> float {
        switch (from) {
            case DType::F32: return static_cast<const float*>(src)[i];
            case DType::F16: return half_bits_to_float(static_cast<const std::uint16_t*>(src)[i]);
            case DType::BF16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(src)[i]);
        }
        return 0.f;
    };
    for (std::size_t i = 0; i < n; ++i) {
        const float v = load(i);
        switch (to) {
            case DType::F32: static_cast<float*>(dst)[i] = v; break;
            case DType::F16: static_cast<std::uint16_t*>(dst)[i] = float_to_half_bits(v); break;
            case DType::BF16: static_cast<std::uint16_t*>(dst)[i] = float_to_bf16_bits(v); break;
        }
    }
}
}  // namespace

ReadSums CheckpointReader::Impl::execute_read(const ReadPlan& plan, const std::vector<TensorSliceOut>& slices) {
    const std::vector<TensorRead>& tr = plan.tensors;
    ReadSums sums{std::vector<std::uint64_t>(slices.size(), 0), std::vector<std::int64_t>(slices.size(), 0)};
    std::vector<std::uint64_t>& partial = sums.partial;
    std::vector<std::int64_t>& counted = sums.counted;
    // As in the writer: open everything (collective metadata), read the collective-I/O
    // tensors, then each rank reads its independent pieces without waiting for the others.
    std::vector<h5::Handle> dsets(slices.size());
    collectively(comm, [&] {
        for (std::size_t i = 0; i < slices.size(); ++i)
            if (!tr[i].direct) dsets[i] = open_dataset(*tr[i].entry);
    });
    std::vector<unsigned char> staging;
    // Pieces read independently into their final buffers are summed on a helper thread
    // while the next piece is read (1 rank: the checksum no longer adds to the load time).
    ChecksumWorker worker(Phase::LoadVerify);
    auto convert = [&](std::size_t i, std::size_t n) {
        PhaseTimer t(Phase::LoadScatter);
        convert_elements(tr[i].stored, staging.data(), slices[i].dtype, slices[i].data, n);
    };
    // Tensor i through H5Dread, collectively or not.
    auto read_one = [&](std::size_t i, bool collective) {
        const TensorSliceOut& t = slices[i];
        const ManifestEntry& e = *tr[i].entry;
        const std::size_t esize = tr[i].esize;
        const std::size_t n = static_cast<std::size_t>(tr[i].elements);
        // Converting: read the stored type into staging, convert after. (Not in HDF5: a
        // conversion in H5Dread turns collective I/O into independent I/O.)
        unsigned char* dest = static_cast<unsigned char*>(t.data);
        if (tr[i].convert) {
            staging.resize(n * esize);
            dest = staging.data();
        }
        const bool verify = plan.verifying && n > 0;
        // Independent reads go in cache-sized pieces, each checksummed while still cached:
        // by the worker, unless the piece lands in the staging buffer the next tensor reuses.
        const bool to_worker = !collective && dest == t.data;
        auto io = [&](const Selection& piece, std::size_t mem_offset) {
            read_open(dsets[i].get(), e, piece, dest + mem_offset, collective);
            if (!verify) return;
            if (to_worker) {
                worker.add(&partial[i], e.shape, piece, esize, dest + mem_offset);
            } else {
                PhaseTimer tv(Phase::LoadVerify);
                partial[i] = checksum_add(partial[i], checksum_selection(e.shape, piece, esize, dest + mem_offset));
            }
        };
        if (collective) io(t.selection, 0);
        else for_each_piece(e.shape, t.selection, esize, io);
        if (verify) counted[i] = static_cast<std::int64_t>(n);
        if (tr[i].convert) convert(i, n);
    };
    // This rank's runs of tensor i (row-major inside each box: the packed order) into dest.
    auto add_runs = [&](DirectReads& reads, std::size_t i, unsigned char* dest) {
        const ManifestEntry& e = *tr[i].entry;
        const std::size_t esize = tr[i].esize;
        for (const Box& b : slices[i].selection.boxes(e.shape))
            for_each_run(e.shape, b, [&](std::int64_t start, std::int64_t len) {
                const std::uint64_t off = static_cast<std::uint64_t>(start) * esize;
                const std::size_t bytes = static_cast<std::size_t>(len) * esize;
                reads.add(i, &e.name, tr[i].offset + off, off, dest, bytes);
                dest += bytes;
            });
        if (plan.verifying) counted[i] = tr[i].elements;
    };
    for (std::size_t i = 0; i < slices.size(); ++i)
        if (plan.collective_io) collectively(comm, [&] { read_one(i, true); });
    std::exception_ptr err;
    StridedGather gather(comm);
    // Domains' checksums: every owner's counts (replicas own domains too), not the leaders'.
    std::vector<std::uint64_t> domain_partial(slices.size(), 0);
    std::deque<std::vector<unsigned char>> gather_staging;  // gathered tensors stored in another type
    try {
        // This rank's domains of the gathered tensors, then all of its direct pieces, each in
        // one sweep over the file, straight into the caller's buffers; tensors stored in
        // another type one by one through staging.
        DirectReads domains(path, opts.readahead_bytes);
        for (std::size_t i = 0; i < slices.size(); ++i) {
            if (!tr[i].gathered) continue;
            const TensorSliceOut& t = slices[i];
            const ManifestEntry& e = *tr[i].entry;
            const std::size_t esize = tr[i].esize;
            auto* dest = static_cast<unsigned char*>(t.data);
            if (tr[i].convert) dest = gather_staging.emplace_back(tr[i].elements * esize).data();
            std::vector<StridedGather::Run> wanted;
            if (tr[i].elements > 0)
                for (const Box& b : t.selection.boxes(e.shape))
                    for_each_run(e.shape, b, [&](std::int64_t start, std::int64_t len) {
                        const std::size_t bytes = static_cast<std::size_t>(len) * esize;
                        wanted.push_back({static_cast<std::uint64_t>(start) * esize, dest, bytes});
                        dest += bytes;
                    });
            const auto mine = gather.add(i, e.name, tr[i].offset,
                                         static_cast<std::uint64_t>(num_elements(e.shape)) * esize, std::move(wanted));
            if (mine) domains.add(i, &e.name, tr[i].offset + mine->lo, mine->lo, mine->data, mine->hi - mine->lo);
        }
        domains.run(opts.verify_checksums ? &domain_partial : nullptr, &worker);
        DirectReads reads(path, opts.readahead_bytes);
        std::vector<std::size_t> converted;
        for (std::size_t i = 0; i < slices.size(); ++i) {
            if (tr[i].gathered || !tr[i].direct || tr[i].elements == 0) continue;
            if (tr[i].convert) converted.push_back(i);
            else add_runs(reads, i, static_cast<unsigned char*>(slices[i].data));
        }
        reads.run(plan.verifying ? &partial : nullptr, &worker);
        for (std::size_t i : converted) {
            const auto n = static_cast<std::size_t>(tr[i].elements);
            staging.resize(n * tr[i].esize);
            add_runs(reads, i, staging.data());
            reads.run(plan.verifying ? &partial : nullptr, nullptr);  // summed before staging is reused
            convert(i, n);
        }
        for (std::size_t i = 0; i < slices.size(); ++i)
            if (!plan.collective_io && !tr[i].direct) read_one(i, false);
        PhaseTimer t(Phase::LoadVerifyWait);
        worker.finish();
    } catch (...) {
        err = std::current_exception();
    }
    PhaseTimer agree_timer(Phase::LoadAgree);
    agree_on_error(comm, err);
    agree_timer.stop();
    {
        PhaseTimer t(Phase::LoadExchange);
        stats.gathered_bytes += gather.domain_bytes();
        collectively(comm, [&] { gather.exchange(); });  // every rank read its domains
    }
    for (std::size_t i = 0, k = 0; i < slices.size(); ++i) {
        if (!tr[i].gathered) continue;
        if (tr[i].convert) {
            PhaseTimer t(Phase::LoadScatter);
            convert_elements(tr[i].stored, gather_staging[k++].data(), slices[i].dtype, slices[i].data,
                             static_cast<std::size_t>(tr[i].elements));
        }
        // Counted once (rank 0) for the whole tensor: the domains tile it and every owner
        // summed its own; verify's reduction adds the owners' sums.
        partial[i] = domain_partial[i];
        counted[i] = opts.verify_checksums && rank == 0 ? num_elements(slices[i].global_shape) : 0;
    }
    PhaseTimer agree_rest(Phase::LoadAgree);
    collectively(comm, [&] {
        for (auto& d : dsets)
            if (d.valid()) h5::check_status(d.close(), "closing a dataset of " + path);
    });
    return sums;
}

}  // namespace gpt::ckpt
