"""The reports' metric count reads as separate kinds: a new user read "86 window metrics (86 with a value, 1
unavailable)" as 87 metrics, 86 of them with a value."""

from perfonto.analysis.report_json import metric_count_text


def test_the_unavailable_ones_are_not_read_as_part_of_the_evaluated():
    text = metric_count_text({"evaluated": 86, "with_value": 86, "unavailable": 1, "request": 19})
    assert text == "86 window metrics evaluated (86 with a value), 1 unavailable and 19 request-level"
