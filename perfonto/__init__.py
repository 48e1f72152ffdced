"""perfonto perfonto layer."""
