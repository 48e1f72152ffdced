"""perfonto.codegen: emitters from a compiled metric graph — the NumPy-only evaluator (batch and
streaming), SQL for DuckDB and Spark, the Markdown docs site, JSON Schemas and the C header."""
