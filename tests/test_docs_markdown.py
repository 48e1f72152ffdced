"""The per-run Markdown reference: serving metrics state definition, population and source; catalog
text cannot inject Markdown structure."""

from perfonto.codegen.docs import _esc, generate_markdown


def test_serving_metric_pages_state_definition_population_source(library):
    text = generate_markdown(library)
    for name, pop in (
        ("ttft", "one value per `request` record"),
        ("itl", "one value per `token_gap` record"),
        ("ttft_p50", "one value per run"),
        ("mfu", "a ratio of server totals"),
        ("tokens_per_second", "a sum over chips"),
    ):
        page = text[text.index(f"### `{name}`") :]
        page = page[: page.index("\n### ", 5)] if "\n### " in page[5:] else page
        assert "**formula**" in page and "**description**" in page and pop in page, name
    assert "**source**: Chowdhery" in text[text.index("### `mfu`") :]


def test_catalog_text_cannot_inject_markdown():
    bad = "# Heading\r| row |\n![img](http://evil.example/x.png) <script>"
    out = _esc(bad)
    import re

    assert "\n" not in out and "\r" not in out
    for ch in "#|![]()<>":  # every Markdown-structural character is backslash-escaped
        assert not re.search(r"(?<!\\)" + re.escape(ch), out), ch
