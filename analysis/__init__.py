"""perfonto.analysis: what a counter dump says — evaluation at window, chip and server level, clock
alignment, cross-chip analysis, record (request) metrics, bottleneck and top-down, validation against
ground truth. It reads dumps, never the emulator."""
