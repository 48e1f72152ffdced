"""Small helpers shared by tests (importable as `helpers`; pytest puts tests/ on sys.path)."""
from perfonto.metrics.compiler import compile_texts


def compile_src(gen, text: str, name: str = "t.metrics"):
    return compile_texts(gen, {name: text})
