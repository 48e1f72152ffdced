"""perfonto dsl layer."""
