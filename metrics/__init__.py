"""perfonto metrics layer."""
