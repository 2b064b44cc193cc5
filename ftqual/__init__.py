"""ftqual: qualify checkpoint-based fault recovery of Megatron-LM under NVRx's ft_launcher."""

__version__ = "0.1.0"
