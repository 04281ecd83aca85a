// The peer of bench/checkpoint: dd on the same disk, run by rank 0 right before and right
// after each measured save or load, so each ratio compares with the disk's speed of that
// moment. The disk of our VMs drifts by 2x within a minute (the same 1-rank save took 1.0 s
// and 2.1 s two minutes apart, dd beside it following): a dd measured once before all rank
// counts and once after them (the old table) misattributes that drift to the rank count.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::bench {

// MB/s of dd moving `bytes` (rounded down to whole 4 MiB blocks) on `file`, as dd itself
// times it. Writes go from /dev/zero with conv=fsync (the save fsyncs before it publishes);
// reads come after the file is evicted from the page cache (fadvise DONTNEED on the fsynced
// file, what `dd iflag=nocache count=0` does). The bench reads the checkpoint file itself:
// the same blocks in the same state of the host's cache as the load that follows (a file
// just written reads back at up to 4.6 GB/s here, an older one at 1.2 GB/s).
struct RawSpeed {
    double buffered = 0, direct = 0;  // through the page cache / oflag,iflag=direct
    double best() const { return buffered > direct ? buffered : direct; }
};
RawSpeed dd_write(const std::string& file, std::uint64_t bytes);
RawSpeed dd_read(const std::string& file, std::uint64_t bytes);  // the file's first bytes

}  // namespace gpt::bench
