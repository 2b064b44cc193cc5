# Source on the GPU machine (the stack of docs/gpu-qualification/): wheels from .whl, Megatron from .megatron.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 TZ=UTC
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH="/tmp/site:$PWD" PATH="/tmp/site/bin:$PATH"
mkdir -p /tmp/mlm && tar xzf .megatron/mlm.tar.gz -C /tmp/mlm && export MEGATRON_PATH=/tmp/mlm
# Megatron compiles its dataset helper on rank 0 at every start; build it once so runs don't race.
make -s -C /tmp/mlm/megatron/core/datasets >/dev/null || return 1
