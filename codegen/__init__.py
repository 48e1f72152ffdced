"""perfonto codegen layer."""
