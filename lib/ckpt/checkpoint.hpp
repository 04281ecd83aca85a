// The checkpoint I/O layer in one include: CheckpointWriter (parallel save + atomic
// publish), CheckpointReader (validated parallel load of any slice), load_checkpoint
// (--load / --ckpt-step / --load-fallback), and the save-folder helpers.
#pragma once

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/load.hpp"
#include "ckpt/selection.hpp"
#include "ckpt/tensor_slice.hpp"
#include "ckpt/checkpoint_saver.hpp"
