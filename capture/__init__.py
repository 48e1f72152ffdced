"""The capture layer: reading counter dumps (the collector format's layouts, files, Hive partitions,
grids and gaps, topology) into raw registers in time order per (host, chip). It knows the ontology
only; the metric compiler (``perfonto.metrics``) and everything after it read captures through it."""
