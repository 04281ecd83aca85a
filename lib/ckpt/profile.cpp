#include "ckpt/profile.hpp"

namespace gpt::ckpt {

const char* phase_name(Phase p) {
    switch (p) {
        case Phase::SaveCreate: return "create";
        case Phase::SaveChecksum: return "checksum";
        case Phase::SaveChecksumWait: return "checksum_wait";
        case Phase::SaveWrite: return "write";
        case Phase::SaveWriteback: return "writeback";
        case Phase::SaveFsync: return "fsync";
        case Phase::SaveMetadata: return "metadata";
        case Phase::SavePublish: return "publish";
        case Phase::SaveCollective: return "collective";
        case Phase::SaveExchange: return "exchange";
        case Phase::LoadOpen: return "open";
        case Phase::LoadRead: return "read";
        case Phase::LoadVerify: return "verify";
        case Phase::LoadVerifyWait: return "verify_wait";
        case Phase::LoadScatter: return "scatter";
        case Phase::LoadAgree: return "agree";
        case Phase::LoadExchange: return "exchange";
        case Phase::LoadClose: return "close";
        case Phase::kCount: break;
    }
    return "?";
}

PhaseTimes& phase_times() {
    static PhaseTimes times;
    return times;
}

}  // namespace gpt::ckpt
