#!/bin/bash
# A team's launch script as ftqual reads it (config megatron_args_file; never run by ftqual), written like
# Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh and scaled to one GPU: 8 layers, hidden 1024,
# a global batch of 16 in micro-batches of 2 (8 accumulation steps on one GPU), an evaluation of 4 steps every
# 5 iterations, and ftqual's own flags (--save, --load, --save-interval, --train-iters, --log-interval) left in.
# The data is the preset's mock data: the team's corpus is not on the GPU machine.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=1
NUM_NODES=1
MASTER_ADDR=localhost
MASTER_PORT=6000

CHECKPOINT_PATH=$1 #<Specify path>
TENSORBOARD_LOGS_PATH=/tmp/tb

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 8
    --hidden-size 1024
    --num-attention-heads 16
    --seq-length 1024
    --max-position-embeddings 1024
    --attention-backend auto # Can use (flash/fused/unfused/local)
)

TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 16
    --train-iters 500000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --init-method-std 0.006
    --clip-grad 1.0
    --lr 6.0e-5
    --lr-decay-style cosine
    --min-lr 6.0e-6
    --lr-warmup-fraction .001
    --lr-decay-iters 430000
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 5
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
    --eval-iters 4
    --tensorboard-dir $TENSORBOARD_LOGS_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
