"""perfonto.metrics: the metric compiler (names, units, dimensions, instance axes, the DAG), the window
rules that turn raw registers into deltas, the reference interpreter, catalog loading and the shipped
metric library."""
