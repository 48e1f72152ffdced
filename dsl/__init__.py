"""perfonto.dsl: the metric language — its lark grammar, the parser that keeps every node's span, and
the AST (small frozen dataclasses) with a printer that round-trips expressions."""
