"""A signal's `reset_indicator` and `renamed_to` must name signals of the generation: each wrong name is an
`unknown-name` error located at the attribute, with a did-you-mean hint where a close name exists and the
attribute's own advice otherwise (ontology.generation._check_signal_references)."""

from test_ontology import GOOD, load_text


def test_a_reset_indicator_or_replacement_that_is_not_a_signal_is_located_with_a_hint(tmp_path):
    text = GOOD.replace(
        "width: 32, description: busy}",
        "width: 32, description: busy, reset_indicator: mxu.busy_cycle,"
        " stability: deprecated, renamed_to: nosuch.thing}",
    )
    gen, diags = load_text(tmp_path, text)
    assert gen is None
    got = [(d.code, d.message, d.hint, d.span.line) for d in diags]
    assert got == [
        (
            "unknown-name",
            "signal `mxu.busy_cycles`: reset indicator `mxu.busy_cycle` is not a signal",
            "did you mean `mxu.busy_cycles`?",
            11,
        ),
        (
            "unknown-name",
            "signal `mxu.busy_cycles`: renamed_to `nosuch.thing` is not a signal",
            "name the signal that replaces it",
            11,
        ),
    ], got
