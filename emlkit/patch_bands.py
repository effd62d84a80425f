"""The value of `--patch-stages auto` (LowerOptions.patch_bands), in a module of its own without torch: the CLI checks
its arguments before torch is imported."""

PATCH_AUTO = -1
