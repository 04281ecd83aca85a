// Emulated nccl.h (tests/cuda_emu): the NCCL subset our code calls, carried over MPI between
// the processes of the job, on the emulator's device memory (gpt_emu/memory.hpp).
//
// What is emulated and its limits:
//  - Communicators from a unique id, formed by a handshake over MPI_COMM_WORLD with the id's
//    creator, which must be a member of the communicator (NCCL lets a non-member create it).
//  - Collectives exchange their data over MPI when issued (after earlier work on their
//    stream; all ranks issue the collectives of one communicator in the same order), but
//    their results land in device memory only when their stream completes, so reading a
//    result without ordering after the stream sees the old bytes, as on a GPU. Reductions are deterministic (rank order; fp16 and bf16 accumulate in
//    fp32 and round once to nearest even); ncclAvg is sum / nranks.
//  - Send/receive are MPI non-blocking operations completed when their stream synchronises
//    (gpt_emu::stream_add_pending), or earlier when a later NCCL call touches their buffer;
//    messages between two ranks of a communicator match in posting order, as in NCCL.
//  - Groups defer point-to-point and collectives to the outermost ncclGroupEnd.
//  - No fp8 types, no non-blocking communicators (ncclInProgress is never returned), no
//    split/config/user-op API; one operation moves at most 2^31-1 bytes (MPI int counts).
//
// Value-compatible with NCCL's enums, but C++ linkage and its own comm type, so a binary may
// link the real libnccl as well.
#pragma once

#include <cstddef>

#include "cuda_runtime.h"

#define NCCL_UNIQUE_ID_BYTES 128

struct ncclUniqueId {
    char internal[NCCL_UNIQUE_ID_BYTES];
};

typedef struct ncclEmuComm* ncclComm_t;

enum ncclResult_t {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8,
};

enum ncclRedOp_t {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
};

enum ncclDataType_t {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
};

// Needs MPI initialised. Call on one process; hand the id to the others (e.g. MPI_Bcast).
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
// Blocks until all nranks members (the id's creator among them) have called it.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
// Destroy completes the communicator's outstanding sends/receives first; Abort cancels them.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

const char* ncclGetErrorString(ncclResult_t result);
// The calling thread's last error message (any communicator), "" if none.
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, std::size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, std::size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, std::size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
