"""The stack under test: its identity, the facts probed on a node, the resolution of `auto`.

The stack under test: its identity (what a verdict holds for), the facts probed on a node, the identity
of one workflow invocation, and the resolution of the stack's Megatron and NVRx choices."""
