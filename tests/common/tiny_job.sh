# Sourced by the shell tests that train gpt-tiny on mock data under mpiexec: the scratch
# folder with the repository's configs and data linked in, one thread per rank, and gpt-tiny
# (mock data from its INI file unless a test gives a data path)
# shrunk to 2 layers of hidden 64 (seconds per run on 2 oversubscribed cores).
#   tiny_job_setup SCRATCH SOURCE_DIR   empties SCRATCH and cd's into it
#   "${TINY_ARGS[@]}"                   model, batch and data flags (add --lr, dropout, ...)
#   losses LOG                          "ITERATION LOSS" for each iteration line of LOG
tiny_job_setup() {
  rm -rf "$1" && mkdir -p "$1" && cd "$1" || { echo "FAIL: cannot use $1"; exit 1; }
  ln -s "$2/configs" configs && ln -s "$2/data" data
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
}
TINY_ARGS=(--config configs/gpt-tiny.ini --num-layers 2 --hidden-size 64 --num-attention-heads 2
           --seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
           --log-interval 1 --eval-iters 0 --device cpu --distributed-backend mpi)
losses() { grep -oE "iteration +[0-9]+/.*lm loss: [0-9.E+-]+" "$1" | sed -E 's/^iteration +([0-9]+)\/.*lm loss: /\1 /'; }
