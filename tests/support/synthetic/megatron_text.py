"""Megatron-LM core_v0.19 / NVRx 0.7 text recorded on H200 (tests fixtures), as templates for make_run.

Extracted once from the recorded `kill-2gpu` run directory. Placeholders: @CKPT@ (checkpoint dir as printed),
@WS@ world size, @DP@ data-parallel size, @GBS@ global batch size, @SI@ save interval, @ITERS@ train iters,
@SAMPLES@ train samples (iters x global batch), @TS@ a Megatron datetime. Lines carry no rank prefix.
"""

# ruff: noqa: E501  (recorded log text: lines are as long as Megatron printed them)

from __future__ import annotations

# every rank prints these while importing Megatron without TE/Apex
IMPORT_WARNINGS: tuple[str, ...] = (
    "/opt/mlm/megatron/core/optimizer/__init__.py:25: UserWarning: Transformer Engine and Apex are not installed. Falling back to Torch optimizers.",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/inference/contexts/kv_block_allocator.py:426: SyntaxWarning: invalid escape sequence '\\-'",
    '  """Evict LRU cached blocks to free up space in the pool.',
    "/opt/mlm/megatron/core/distributed/fsdp/src/megatron_fsdp/mixed_precision.py:115: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/optimizer/optimizer.py:29: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/optimizer/clip_grads.py:32: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier, multi_tensor_l2norm, and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/models/backends.py:34: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/core/models/gpt/gpt_layer_specs.py:74: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/core/models/gpt/heterogeneous/heterogeneous_layer_specs.py:68: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/training/utils/common_utils.py:27: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_l2norm",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/extensions/transformer_engine_spec_provider.py:88: UserWarning: Only transformer-engine>=1.7.0 supports MoE experts, but your version is 0.0.0. Use local linear implementation instead.",
    "  warnings.warn(",
)

# rank 0, before the arguments dump
ARGS_HEADER: tuple[str, ...] = (
    "> PyTorch version ................ 2.11.0+cu130",
    "> Megatron-Core version .......... 0.19.1",
    "> Transformer Engine version ... 0.0.0",
    "using world size: @WS@, data-parallel size: @DP@, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 1, pipeline-model-parallel size: 1",
    "/opt/mlm/megatron/training/utils/common_utils.py:454: UserWarning: Overriding default arguments for tokenizer_type:GPT2BPETokenizer with tokenizer_type:NullTokenizer",
    "  warnings.warn(message)",
    "Number of virtual stages per pipeline stage: None",
    "accumulate and all-reduce gradients in fp32 for bfloat16 data type.",
    "using torch.bfloat16 for parameters ...",
    "------------------------ arguments ------------------------",
)

# rank 0 arguments dump (a subset of the 815 recorded arguments, same format): name=value
ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("_is_global_batch_size_explicitly_specified", "True"),
    ("account_for_embedding_in_pipeline_split", "False"),
    ("account_for_loss_in_pipeline_split", "False"),
    ("accumulate_allreduce_grads_in_fp32", "True"),
    ("activation_func_clamp_value", "None"),
    ("activation_offload_fraction", "1.0"),
    ("adam_beta1", "0.9"),
    ("adam_beta2", "0.999"),
    ("adam_eps", "1e-08"),
    ("add_bias_linear", "True"),
    ("add_position_embedding", "True"),
    ("add_qkv_bias", "True"),
    ("adlr_autoresume", "False"),
    ("adlr_autoresume_interval", "1000"),
    ("align_grad_reduce", "True"),
    ("align_param_gather", "False"),
    ("allow_ambiguous_pad_tokens", "False"),
    ("app_tag_run_name", "None"),
    ("app_tag_run_version", "0.0.0"),
    ("apply_query_key_layer_scaling", "False"),
    ("apply_residual_connection_post_layernorm", "False"),
    ("apply_rope_fusion", "False"),
    ("apply_wd_to_qk_layernorm", "False"),
    ("async_ckpt_cpu_priority", "10"),
    ("async_ckpt_io_priority", "3"),
    ("async_ckpt_use_cpu_shm", "False"),
    ("async_save", "True"),
    ("async_strategy", "nvrx"),
    ("attention_backend", "AttnBackend.auto"),
    ("attention_dropout", "0.1"),
    ("attention_output_gate", "False"),
    ("attention_softmax_in_fp32", "False"),
    ("auto_detect_ckpt_format", "False"),
    ("barrier_with_L1_time", "True"),
    ("batch_invariant_mode", "False"),
    ("bert_binary_head", "True"),
    ("bert_embedder_type", "megatron"),
    ("bert_load", "None"),
    ("bf16", "True"),
    ("bias_dropout_fusion", "True"),
    ("calc_ft_timeouts", "False"),
    ("ckpt_assume_constant_structure", "False"),
    ("ckpt_format", "torch_dist"),
    ("ckpt_fully_parallel_save", "True"),
    ("ckpt_step", "None"),
    ("consumed_train_samples", "0"),
    ("data_parallel_size", "@DP@"),
    ("ddp_param_name_patterns_for_fp32_local_accumulation", "[]"),
    ("dist_ckpt_strictness", "assume_ok_unexpected"),
    ("dist_ckpt_workers", "1"),
    ("distributed_backend", "nccl"),
    ("distributed_timeout_minutes", "10"),
    ("enable_ft_package", "True"),
    ("encoder_num_layers", "4"),
    ("encoder_seq_length", "256"),
    ("eval_global_batch_size", "@GBS@"),
    ("eval_interval", "1000"),
    ("eval_iters", "0"),
    ("exit_duration_in_mins", "None"),
    ("exit_interval", "None"),
    ("exit_on_missing_checkpoint", "False"),
    ("ffn_hidden_size", "2048"),
    ("finetune", "False"),
    ("ft_num_warmup_iters", "0"),
    ("global_batch_size", "@GBS@"),
    ("gradient_accumulation_fusion", "False"),
    ("hidden_size", "512"),
    ("inference_dynamic_batching_cuda_graph_mixed_prefill_count", "16"),
    ("inprocess_active_world_size", "@WS@"),
    ("load", "@CKPT@"),
    ("load_main_params_from_ckpt", "False"),
    ("log_interval", "1"),
    ("log_throughput", "False"),
    ("lr", "0.0001"),
    ("masked_softmax_fusion", "False"),
    ("max_position_embeddings", "256"),
    ("micro_batch_size", "1"),
    ("mock_data", "True"),
    ("no_load_optim", "None"),
    ("no_load_rng", "None"),
    ("non_persistent_save_interval", "None"),
    ("num_attention_heads", "8"),
    ("num_layers", "4"),
    ("override_ckpt_iteration", "None"),
    ("pipeline_model_parallel_size", "1"),
    ("pretrained_checkpoint", "None"),
    ("rank", "0"),
    ("save", "@CKPT@"),
    ("save_interval", "@SI@"),
    ("seed", "1234"),
    ("seq_length", "256"),
    ("tensor_model_parallel_size", "1"),
    ("tokenizer_sentencepiece_ignore_extra_whitespaces", "True"),
    ("tokenizer_type", "NullTokenizer"),
    ("train_iters", "@ITERS@"),
    ("transformer_impl", "local"),
    ("use_checkpoint_opt_param_scheduler", "False"),
    ("use_dist_ckpt", "True"),
    ("use_distributed_optimizer", "False"),
    ("use_persistent_ckpt_worker", "True"),
    ("vocab_size", "1024"),
    ("world_size", "@WS@"),
)

# rank 0, after the arguments dump
ARGS_END: tuple[str, ...] = (
    "-------------------- end of arguments ---------------------",
    "INFO:megatron.core.num_microbatches_calculator:setting number of microbatches to constant 1",
)

# last rank (print_rank_last)
LAST_RANK_ONE_LOGGER: tuple[str, ...] = (
    "WARNING: one_logger package is required to enable e2e metrics tracking. please go to https://confluence.nvidia.com/display/MLWFO/Package+Repositories for details to install it",
)

# rank 0: tokenizer, NVRx FT client init, parallel state (FT: lines are parsed)
FT_INIT: tuple[str, ...] = (
    "INFO:megatron.core.tokenizers.utils.build_tokenizer: > padded vocab (size: 1024) with 0 dummy tokens (new size: 1024)",
    "FT: initializing...",
    "FT: initialized. Timeouts=SectionTimeouts(out_of_section=180.00, sections=[setup=900.00, step=120.00, checkpointing=600.00, ], calculated_sections=set(), is_out_of_section_calculated=False)",
    "init_persistent_async_worker: 0, Starting Async Caller",
    "INFO:nvidia_resiliency_ext.checkpointing.async_ckpt.core:PersistentAsyncCaller: 0, Starting Async Caller",
    "init_persistent_async_worker: rank 0, Async Caller Started in 0.025334835052490234 seconds",
    "WARNING:megatron.core.rerun_state_machine:RerunStateMachine initialized in mode RerunMode.VALIDATE_RESULTS",
    "> initializing torch distributed ...",
    "> initialized tensor model parallel with size 1",
    "> initialized gtp weight remat with size 1",
    "> initialized pipeline model parallel with size 1",
    "> setting random seeds to 1234 ...",
    "> compiling dataset index builder ...",
)

# rank 0, first cycle (index builder compiled)
MAKE_FIRST: tuple[str, ...] = (
    "make: Entering directory '/opt/mlm/megatron/core/datasets'",
    "/opt/gcc/bin/g++ -O3 -Wall -shared -std=c++17 -fPIC -fdiagnostics-color -I/usr/include/python3.12 -I/opt/torch/.venv/lib/python3.12/site-packages/pybind11/include helpers.cpp -o helpers_cpp.cpython-312-x86_64-linux-gnu.so",
    "make: Leaving directory '/opt/mlm/megatron/core/datasets'",
    ">>> done with dataset index builder. Compilation time: 9.520 seconds",
)

# rank 0, later cycles
MAKE_AGAIN: tuple[str, ...] = (
    "make: Entering directory '/opt/mlm/megatron/core/datasets'",
    "make: Nothing to be done for 'default'.",
    "make: Leaving directory '/opt/mlm/megatron/core/datasets'",
    ">>> done with dataset index builder. Compilation time: 0.032 seconds",
)

# rank 0
BARRIER_WARNING: tuple[str, ...] = (
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py:83: UserWarning: barrier(): using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
    "  return func(*args, **kwargs)",
)

# rank 0 re-imports (persistent checkpoint worker spawn)
REIMPORT_WARNINGS: tuple[str, ...] = (
    "/opt/mlm/megatron/core/optimizer/__init__.py:25: UserWarning: Transformer Engine and Apex are not installed. Falling back to Torch optimizers.",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/inference/contexts/kv_block_allocator.py:426: SyntaxWarning: invalid escape sequence '\\-'",
    '  """Evict LRU cached blocks to free up space in the pool.',
    "/opt/mlm/megatron/core/distributed/fsdp/src/megatron_fsdp/mixed_precision.py:115: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/optimizer/optimizer.py:29: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/optimizer/clip_grads.py:32: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier, multi_tensor_l2norm, and multi_tensor_scale",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/models/backends.py:34: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/core/models/gpt/gpt_layer_specs.py:74: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/core/models/gpt/heterogeneous/heterogeneous_layer_specs.py:68: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "/opt/mlm/megatron/training/utils/common_utils.py:27: UserWarning: Transformer Engine and Apex are not installed. Falling back to local implementations of multi_tensor_applier and multi_tensor_l2norm",
    "  warnings.warn(",
    "/opt/mlm/megatron/core/extensions/transformer_engine_spec_provider.py:88: UserWarning: Only transformer-engine>=1.7.0 supports MoE experts, but your version is 0.0.0. Use local linear implementation instead.",
    "  warnings.warn(",
)

# rank 0; the time value is replaced
INIT_DONE: tuple[str, ...] = (
    "time to initialize megatron (seconds): 17.850",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py:83: UserWarning: barrier(): using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
    "  return func(*args, **kwargs)",
)

# last rank
STARTUP_TIMERS: tuple[str, ...] = (
    "INFO:megatron.core.timers:(min, max) time across ranks (ms):",
    "    startup-program-entry-spread ...................: (0.44, 0.44)",
    "    startup-library-setup ..........................: (12312.88, 13160.84)",
    "    startup-program-setup ..........................: (3291.82, 3387.55)",
    "    startup-in-process-setup .......................: (0.00, 0.00)",
    "    startup-in-job-setup ...........................: (145.80, 148.69)",
    "    startup-initialize-megatron ....................: (10747.49, 11496.37)",
    "    startup-set-jit-fusion-options .................: (1664.57, 2235.15)",
    "    all-reduce-start-timestamps-tensor .............: (1.26, 571.86)",
    "    startup-megatron-init-local ....................: (13129.70, 13881.49)",
    "    startup-megatron-init-global ...................: (29582.36, 29582.36)",
)

# rank 0: model, DDP buckets, optimizer
MODEL_SETUP: tuple[str, ...] = (
    "WARNING:megatron.core.models.gpt.gpt_model:GPTModel IS DEPRECATED. GPTModel is only accepting critical bug fixes, no new features. Please reference the migration guide `docs/user-guide/hybrid-model-migration.md` for details on how to use `HybridModel`",
    " > number of parameters on (tensor, gtp_remat, pipeline) model parallel rank (0, 0, 0): 13265920",
    "INFO:megatron.core.distributed.distributed_data_parallel:Setting up DistributedDataParallel with config DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False, overlap_param_gather=False, align_param_gather=False, use_distributed_optimizer=False, num_distributed_optimizer_instances=1, check_for_nan_in_grad=True, check_for_large_grads=False, bucket_size=None, num_buckets=None, pad_buckets_for_high_nccl_busbw=False, reduce_scatter_with_fp32_accumulation=False, param_name_patterns_for_fp32_local_accumulation=(), average_in_collective=False, fp8_param_gather=False, fp4_param_gather=False, reuse_grad_buf_for_mxfp8_param_ag=False, use_megatron_fsdp=False, use_custom_fsdp=False, data_parallel_sharding_strategy='optim_grads_params', gradient_reduce_div_fusion=True, suggested_communication_unit_size=None, keep_fp8_transpose_cache=False, nccl_ub=False, fsdp_double_buffer=False, fsdp_db_use_persist_buf_on_alloc_fail=False, fsdp_all_gather_in_start_param_sync=True, outer_dp_sharding_strategy='no_shard', disable_symmetric_registration=False, fsdp_manual_registration=False, delay_wgrad_compute=False, megatron_fsdp_main_params_dtype=torch.float32, megatron_fsdp_main_grads_dtype=None, megatron_fsdp_grad_comm_dtype=None, megatron_fsdp_use_decoupled_grad=False, megatron_fsdp_cuda_graph_mode=False, megatron_fsdp_enable_fine_grained_param_gather=False, megatron_fsdp_max_pool_double_buffer=False)",
    "INFO:megatron.core.distributed.param_and_grad_buffer:Number of buckets for gradient all-reduce / reduce-scatter: 1",
    "Params for bucket 1 (13265920 elements, 13265920 padded size, 0 param(s) with extra main_grads):",
    "\tmodule.decoder.final_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.final_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.mlp.linear_fc2.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.mlp.linear_fc2.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.mlp.linear_fc1.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.mlp.linear_fc1.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.pre_mlp_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.pre_mlp_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.self_attention.linear_qkv.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.self_attention.linear_qkv.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.self_attention.linear_proj.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.self_attention.linear_proj.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.input_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.3.input_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.mlp.linear_fc2.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.mlp.linear_fc2.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.mlp.linear_fc1.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.mlp.linear_fc1.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.pre_mlp_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.pre_mlp_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.self_attention.linear_qkv.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.self_attention.linear_qkv.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.self_attention.linear_proj.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.self_attention.linear_proj.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.input_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.2.input_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.mlp.linear_fc2.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.mlp.linear_fc2.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.mlp.linear_fc1.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.mlp.linear_fc1.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.pre_mlp_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.pre_mlp_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.self_attention.linear_qkv.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.self_attention.linear_qkv.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.self_attention.linear_proj.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.self_attention.linear_proj.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.input_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.1.input_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.mlp.linear_fc2.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.mlp.linear_fc2.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.mlp.linear_fc1.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.mlp.linear_fc1.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.pre_mlp_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.pre_mlp_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.self_attention.linear_qkv.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.self_attention.linear_qkv.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.self_attention.linear_proj.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.self_attention.linear_proj.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.input_layernorm.bias (param.main_grad.dtype=torch.float32)",
    "\tmodule.decoder.layers.0.input_layernorm.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.embedding.position_embeddings.weight (param.main_grad.dtype=torch.float32)",
    "\tmodule.embedding.word_embeddings.weight (param.main_grad.dtype=torch.float32)",
    "INFO:megatron.core.distributed.param_and_grad_buffer:Using all-reduce for gradient reductions because self.ddp_config.use_distributed_optimizer=False",
    "/opt/mlm/megatron/core/models/mimo/config/base_configs.py:12: UserWarning: MimoModelConfig is experimental and still under active development. The API may change without notice in future releases.",
    "  class MimoModelConfig:",
    "INFO:megatron.core.optimizer:Setting up optimizer with config OptimizerConfig(lr=0.0001, min_lr=0.0, decoupled_lr=None, decoupled_min_lr=None, weight_decay=0.01, apply_wd_to_qk_layernorm=False, fp8_recipe='delayed', fp16=False, bf16=True, reuse_grad_buf_for_mxfp8_param_ag=False, params_dtype=torch.bfloat16, use_precision_aware_optimizer=False, store_param_remainders=True, main_grads_dtype=torch.float32, main_params_dtype=torch.float32, exp_avg_dtype=torch.float32, exp_avg_sq_dtype=torch.float32, optimizer='adam', loss_scale=None, initial_loss_scale=4294967296, min_loss_scale=1.0, loss_scale_window=1000, hysteresis=2, adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-08, decoupled_weight_decay=True, sgd_momentum=0.9, muon_momentum=0.9, muon_split_qkv=True, muon_nesterov=False, muon_scale_mode='spectral', muon_fp32_matmul_prec='medium', muon_coefficient_type='quintic', muon_num_ns_steps=5, muon_tp_mode='blockwise', muon_extra_scale_factor=1.0, muon_scalar_optimizer='adam', lion_beta1=0.95, lion_beta2=0.98, soap_shampoo_beta=0.95, soap_precondition_frequency=1, soap_use_kl_shampoo=True, adaptive_muon_moment2_method='adamuon', adaptive_muon_beta2=0.95, adaptive_muon_eps=1e-08, use_distributed_optimizer=False, use_layer_wise_distributed_optimizer=False, overlap_param_gather=False, overlap_param_gather_with_optimizer_step=False, optimizer_cpu_offload=False, optimizer_offload_fraction=1.0, use_torch_optimizer_for_cpu_offload=False, overlap_cpu_optimizer_d2h_h2d=False, pin_cpu_grads=True, pin_cpu_params=True, clip_grad=1.0, grad_norm_skip_threshold=inf, log_num_zeros_in_grad=False, barrier_with_L1_time=True, timers=<megatron.core.timers.Timers object at 0x7f517ea00140>, config_logger_dir='', optimizer_cuda_graph=False)",
    "INFO:megatron.core.optimizer_param_scheduler:> learning rate decay style: constant",
)

# rank 0, nothing to load (first cycle)
LOAD_FRESH: tuple[str, ...] = (
    "WARNING: could not find the metadata file @CKPT@/latest_checkpointed_iteration.txt",
    "    will not load any checkpoints and will start from random",
)

# last rank; the values are replaced
LOAD_TIMER_LAST: tuple[str, ...] = (
    "INFO:megatron.core.timers:(min, max) time across ranks (ms):",
    "    load-checkpoint ................................: (0.63, 0.66)",
)

# rank 0, resuming from iteration @IT@ (parsed: loading ... / successfully loaded ...)
LOAD_RESUME: tuple[str, ...] = (
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/checkpoint/utils.py:483: UserWarning: torch.distributed is disabled, unavailable or uninitialized, assuming the intent is to load in a single process.",
    "  return func(*args, **kwargs)",
    "sharded_state_dict metadata loaded from the checkpoint: {'singleton_local_shards': False, 'chained_optim_avoid_prefix': True}",
    " loading distributed checkpoint from @CKPT@ at iteration @IT@",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/checkpoint/logger.py:90: UserWarning: The argument order of load has been changed. Please check the document to avoid future breakages.",
    "  result = func(*args, **kwargs)",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/checkpoint/utils.py:481: UserWarning: torch.distributed is disabled, unavailable or uninitialized, assuming the intent is to load in a single process.",
    "  return func(args[0], **kwargs)",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/checkpoint/planner_helpers.py:489: FutureWarning: Please use DTensor instead and we are deprecating ShardedTensor.",
    '  device = getattr(value, "device", None)',
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/checkpoint/default_planner.py:483: FutureWarning: Please use DTensor instead and we are deprecating ShardedTensor.",
    "  and md.size != obj.size()",
    " checkpoint version 3.0",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0.0001 for learning rate",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0.0 for minimum learning rate",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0 for warmup iterations",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value @SAMPLES@ for total number of iterations",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value constant for learning rate decay style",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0.01 for start weight decay",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value 0.01 for end weight decay",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value @SAMPLES@ for total number of weight decay iterations",
    "INFO:megatron.core.optimizer_param_scheduler: > using checkpoint value constant for weight decay incr style",
    "  successfully loaded checkpoint from @CKPT@ [ t 1/1, gtp_remat 1/1, p 1/1 ] at iteration @IT@",
)

# rank 0
DATASETS: tuple[str, ...] = (
    "> building train, validation, and test datasets ...",
    " > datasets target sizes (minimum size):",
    "    train:      @SAMPLES@",
    "    validation: 0",
    "    test:       0",
    "INFO:megatron.core.datasets.blended_megatron_dataset_config:Let mock = True, as both blend and blend_per_split are None",
    "INFO:megatron.core.datasets.blended_megatron_dataset_config:Let split = 1,1,1, an arbitrarily even split, as mock is True",
    "INFO:megatron.core.datasets.blended_megatron_dataset_config:Let split_matrix = [(0, 0.3333333333333333), (0.3333333333333333, 0.6666666666666666), (0.6666666666666666, 1.0)]",
    "> building train, validation, and test datasets for GPT ...",
    "INFO:megatron.core.datasets.blended_megatron_dataset_builder:Building MockGPTDataset splits with sizes=(@SAMPLES@, 0, 0) and config=GPTDatasetConfig(random_seed=1234, sequence_length=256, blend=None, blend_per_split=None, multiple_validation_sets=False, full_validation=False, split='1,1,1', split_matrix=[(0, 0.3333333333333333), (0.3333333333333333, 0.6666666666666666), (0.6666666666666666, 1.0)], num_dataset_builder_threads=1, path_to_cache=None, mmap_bin_files=True, mock=True, tokenizer=<megatron.core.tokenizers.text.models.default_tokenizer.DefaultTokenizerText object at 0x7fe10c043950>, mid_level_dataset_surplus=0.005, allow_ambiguous_pad_tokens=False, fast_cache_load=False, defer_npy_index_mmap=False, reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=True, drop_last_partial_validation_sequence=True, add_extra_token_to_sequence=True, object_storage_cache_path=None, data_parallel_size=@DP@, sequence_parallel_size=0, hybrid_context_parallel=False, sequences_per_dataset=None, token_dtype_code=8, context_parallel_size=1, inter_document_masking=False)",
    "INFO:megatron.core.datasets.gpt_dataset:Build and save the MockGPTDataset train indices",
    "WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes because path_to_cache is None",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of samples: 266368",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of epochs: 1",
    "INFO:megatron.core.datasets.gpt_dataset:Build and save the MockGPTDataset valid indices",
    "WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes because path_to_cache is None",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of samples: 266248",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of epochs: 1",
    "INFO:megatron.core.datasets.gpt_dataset:Build and save the MockGPTDataset test indices",
    "WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes because path_to_cache is None",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of samples: 266746",
    "INFO:megatron.core.datasets.gpt_dataset:> total number of epochs: 1",
    "> finished creating GPT datasets ...",
)

# rank 0
CKPT_WORKER_STARTED: tuple[str, ...] = (
    "INFO:nvidia_resiliency_ext.checkpointing.async_ckpt.core:PersistentAsyncCaller: persistent ckpt worker for 0 has started",
)

# last rank
SETUP_TIMERS: tuple[str, ...] = (
    "INFO:megatron.core.timers:(min, max) time across ranks (ms):",
    "    model-and-optimizer-setup ......................: (374.09, 374.22)",
    "    train/valid/test-data-iterators-setup ..........: (228.33, 273.03)",
)

# rank 0, before the first iteration of a cycle
TRAIN_START: tuple[str, ...] = (
    "WARNING:megatron.core.rerun_state_machine:Result validation enabled",
    "/opt/mlm/megatron/core/pipeline_parallel/schedules.py:220: UserWarning: The AccumulateGrad node's stream does not match the stream of the node that produced the incoming gradient. This may incur unnecessary synchronization and break CUDA graph capture if the AccumulateGrad node's stream is the default stream. This mismatch is caused by an AccumulateGrad node created prior to the current iteration being kept alive. This can happen if the autograd graph is still being kept alive by tensors such as the loss, or if you are using DDP, which will stash a reference to the node. To resolve the mismatch, delete all references to the autograd graph or ensure that DDP initialization is performed under the same stream as subsequent forwards. If the mismatch is intentional, you can use torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False) to suppress this warning. (Triggered internally at /pytorch/torch/csrc/autograd/input_buffer.cpp:240.)",
    "  Variable._execution_engine.run_backward(",
    "Number of parameters in transformer block in billions:  0.01",
    "Number of active parameters in transformer block in billions:  0.01",
    "Number of parameters in embedding layers in billions: 0.00",
    "Total number of parameters in billions: 0.01",
    "Total number of active parameters in billions: 0.01",
    "Number of parameters in most loaded shard in billions: 0.0131",
)

# rank 0, after the first iteration of a cycle
MEMORY_REPORT: tuple[str, ...] = (
    "compute_activation_memory_without_sp",
    "Activation memory footprint per transformer layer (precise, without SP): 4.2 MB",
    "Theoretical memory footprints: weight and optimizer=225.16 MB, activation=18.77 MB, total=243.93 MB",
    "",
)

# rank 0, after training
CKPT_WORKER_STOPPED: tuple[str, ...] = (
    "INFO:nvidia_resiliency_ext.checkpointing.async_ckpt.core:PersistentAsyncCaller: 0, Destroying Async Caller",
    "INFO:nvidia_resiliency_ext.checkpointing.async_ckpt.core:PersistentAsyncCaller: persistent ckpt worker for 0 has terminated",
    "INFO:nvidia_resiliency_ext.checkpointing.async_ckpt.core:PersistentAsyncCaller: 0, Destroying Async Caller",
)

# some ranks at exit, after the recvValue warning
TCPSTORE_TRACE: tuple[str, ...] = (
    "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x9d (0x7f9b2ff7305d in /opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libc10.so)",
    "frame #1: <unknown function> + 0x6a914bd (0x7f9a98e914bd in /opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so)",
    "frame #2: c10d::TCPStore::check(std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > > const&) + 0x273 (0x7f9a98e8f413 in /opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so)",
    "frame #3: c10d::ProcessGroupNCCL::HeartbeatMonitor::runLoop() + 0x4a5 (0x7f9a7b4ff8c5 in /opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so)",
    "frame #4: <unknown function> + 0xecdb4 (0x7f9b000ecdb4 in /lib/x86_64-linux-gnu/libstdc++.so.6)",
    "frame #5: <unknown function> + 0x9cb84 (0x7f9b3109cb84 in /lib/x86_64-linux-gnu/libc.so.6)",
    "frame #6: <unknown function> + 0x129ecc (0x7f9b31129ecc in /lib/x86_64-linux-gnu/libc.so.6)",
    "",
)

# NCCL_DEBUG=INFO lines every rank prints while its communicators come up. \x01: "<host>:<pid>:<tid> [<lr>]",
# \x02: global rank, \x03: world size. Peers and channels come from the pool index, not the rank.
NCCL_CHATTER: tuple[str, ...] = (
    "\x01 NCCL INFO cudaDriverVersion 13000",
    "\x01 NCCL INFO Bootstrap: Using ib0:10.{a}.{b}.{c}<0>",
    "\x01 NCCL INFO NCCL version 2.27.7+cuda13.0",
    "\x01 NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v10 (v10)",
    "\x01 NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [2]mlx5_4:1/IB [3]mlx5_5:1/IB ; OOB ib0:10.{a}.{b}.{c}<0>",
    "\x01 NCCL INFO ncclCommInitRankConfig comm 0x{h:x} rank \x02 nranks \x03 cudaDev {d} nvmlDev {d} busId {bus}000"
    " commId 0x{cid:x} - Init START",
    "\x01 NCCL INFO Bootstrap timings total 0.0{b:02d}1 (create 0.0000, send 0.0001, recv 0.0{b:02d}0, ring 0.0009, "
    "delay 0.0000)",
    "\x01 NCCL INFO comm 0x{h:x} rank \x02 nRanks \x03 nNodes {a} localRanks 8 localRank {d} MNNVL 0",
    "\x01 NCCL INFO Channel {ch:02d}/32 : {p0} {p1} {p2} {p3} {p4} {p5} {p6} {p7}",
    "\x01 NCCL INFO Trees [{ch}] {p1}/-1/-1->\x02->{p2} [{ch1}] {p3}/-1/-1->\x02->{p4}",
    "\x01 NCCL INFO P2P Chunksize set to 524288",
    "\x01 NCCL INFO Channel {ch:02d}/0 : \x02[{d}] -> {p1}[{d1}] via P2P/CUMEM/read",
    "\x01 NCCL INFO Channel {ch:02d}/0 : {p2}[{d}] -> \x02[{d}] [receive] via NET/IB/{d}/GDRDMA",
    "\x01 NCCL INFO Channel {ch:02d}/0 : \x02[{d}] -> {p3}[{d}] [send] via NET/IB/{d1}/GDRDMA",
    "\x01 NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "\x01 NCCL INFO Connected all trees",
    "\x01 NCCL INFO threadThresholds 8/8/64 | 8192/8/64 | 512 | 512",
    "\x01 NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
    "\x01 NCCL INFO ncclCommInitRankConfig comm 0x{h:x} rank \x02 nranks \x03 cudaDev {d} nvmlDev {d} busId {bus}000"
    " commId 0x{cid:x} - Init COMPLETE",
    "\x01 NCCL INFO Init timings - ncclCommInitRankConfig: rank \x02 nranks \x03 total 0.{b:02d} (kernels 0.18, "
    "alloc 0.03, bootstrap 0.01, allgathers 0.01, topo 0.16, graphs 0.01, connections 0.19, rest 0.02)",
    "\x01 NCCL INFO [Service thread] Connection closed by localRank {d1}",
    "\x01 NCCL INFO comm 0x{h:x} rank \x02 nranks \x03 cudaDev {d} busId {bus}000 - Abort COMPLETE",
)

# Lines any rank may print during training (--noise-lines-per-iter).
TRAIN_NOISE: tuple[str, ...] = (
    "\x01 NCCL INFO Channel {ch:02d}/1 : \x02[{d}] -> {p1}[{d1}] via P2P/CUMEM/read",
    "\x01 NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "\x01 NCCL INFO ncclCommInitRankConfig comm 0x{h:x} rank \x02 nranks \x03 cudaDev {d} nvmlDev {d} busId {bus}000"
    " commId 0x{cid:x} - Init COMPLETE",
    "[rank\x02]:[W{md} ProcessGroupNCCL.cpp:4815] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this "
    "environment variable is thus deprecated. (function operator())",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/utils/data/dataloader.py:665: UserWarning: This DataLoader "
    "will create 2 worker processes in total. Our suggested max number of worker in current system is 1.",
)

# exit-time lines of every rank ({r}: global rank, {stamp}: glog time); the TCPStore ones only on some ranks
TEARDOWN_DESTROY = "[rank{r}]:[W{stamp} ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())"
TEARDOWN_RECV = "[rank{r}]:[W{stamp} TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=65, addr=[localhost]:54342, remote=[localhost]:39885): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
TEARDOWN_DUMP = '[rank{r}]:[W{stamp} ProcessGroupNCCL.cpp:1826] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?'
TEARDOWN_IPC = "[rank{r}]:[W{stamp} CudaIPCTypes.cpp:16] Producer process has been terminated before all shared CUDA tensors released. See Note [Sharing CUDA tensors]"
DEVICE_ID_GUESS = "[rank{r}]:[W{stamp} ProcessGroupNCCL.cpp:5188] Guessing device ID based on global rank. This can cause a hang if rank to GPU mapping is heterogeneous. You can specify device_id in init_process_group()"

# launcher.log (NVRx 0.7 ft_launcher); {run} is the run directory as printed
LAUNCH_OMP = "\n*****************************************\nSetting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n*****************************************"
LAUNCH_RDZV_CONFIGS = "{{'segment': None, 'enable_nic_healthcheck': True, 'link_state_path_template': None, 'cycle_log_prefix': '{run}/logs/train.log', 'timeout': 900, 'join_timeout': 300, 'last_call_timeout': 1, 'close_timeout': 30, 'read_timeout': 60, 'store_connect_wait_seconds': 120, 'upscaling_enabled': True}}"
LAUNCH_RUN_OK = "Agent .run() is OK. No failures in the result. result=RunResult(state=<WorkerState.SUCCEEDED: 'SUCCEEDED'>, return_values={{{ranks}}}, failures={{}})"
