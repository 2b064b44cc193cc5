"""The fixtures the real preflight's tests share with the unit tests of its parts."""

from tests.unit.preflight import test_megatron_compat

our_options = test_megatron_compat.our_options  # the options of this Megatron-LM tree's parser, once
