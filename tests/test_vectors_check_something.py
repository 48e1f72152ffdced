"""`perfonto test` judges vectors that could not fail (issue 15, point 11): a vector that checks
nothing is an error, an expected value outside the metric's declared bounds is flagged, and request
records whose token times disagree with their token counts are refused."""

import json

import pytest

from perfonto.cli import main
from perfonto.metrics.population import records_from_columns

HEAD = "generation: sohu\nvectors:\n"


def _test(tmp_path, capsys, body: str):
    p = tmp_path / "t.vectors.yaml"
    p.write_text(HEAD + body)
    code = main(["test", str(p), "--json"])
    doc = json.loads(capsys.readouterr().out)
    return code, doc


def test_record_metrics_expected_without_records_is_an_error(tmp_path, capsys):
    code, doc = _test(tmp_path, capsys, "  - name: latency without records\n    expect:\n      ttft_p50: 5 ms\n")
    assert code == 1 and doc["passed"] == 0
    (d,) = doc["diagnostics"]
    assert d["code"] == "vector-expect" and d["line"] == 5 and "no records" in d["message"]


def test_a_vector_that_expects_nothing_is_an_error(tmp_path, capsys):
    code, doc = _test(tmp_path, capsys, "  - name: empty\n    interval: 1 ms\n    expect: {}\n")
    assert code == 1 and [d["code"] for d in doc["diagnostics"]] == ["vector-expect"]


def test_expected_value_outside_declared_bounds_is_flagged(tmp_path, capsys):
    body = (
        "  - name: impossible utilisation\n    interval: 1 ms\n    inputs: {seq.elapsed_cycles: 1000, "
        "mxu.busy_cycles: 1500}\n    expect:\n      mxu.utilization: 150\n"
    )
    code, doc = _test(tmp_path, capsys, body)
    assert code == 1
    assert doc["passed"] >= 1  # the value itself matches: 1500 / 1000 busy cycles
    (d,) = doc["diagnostics"]
    assert d["code"] == "vector-bounds" and d["line"] == 7 and "0 .. 100" in d["message"]


@pytest.mark.parametrize(
    "records, why",
    [
        ({"request.output_tokens": [3], "request.token_times": [[0.1, 0.2]]}, "3 output tokens but 2 instants"),
        ({"request.token_times": [[0.3, 0.2]]}, "goes back in time"),
        ({"request.first_token_time": [0.05], "request.token_times": [[0.1, 0.2]]}, "not the first instant"),
        ({"request.completion_time": [0.5], "request.token_times": [[0.1, 0.2]]}, "not the last instant"),
    ],
)
def test_records_whose_token_times_disagree_are_refused(sohu, tmp_path, capsys, records, why):
    with pytest.raises(ValueError, match=why):
        records_from_columns(sohu, records)
    rec = "\n".join(f"      {k}: {json.dumps(v)}" for k, v in records.items())
    code, doc = _test(
        tmp_path, capsys, f"  - name: bad records\n    records:\n{rec}\n    expect:\n      itl_p50: 100 ms\n"
    )
    assert (
        code == 1
        and [d["code"] for d in doc["diagnostics"]] == ["vector-records"]
        and why in doc["diagnostics"][0]["message"]
    )


def test_consistent_records_with_several_tokens_at_one_instant_pass(sohu):
    r = records_from_columns(
        sohu,
        {
            "request.output_tokens": [4],
            "request.first_token_time": [0.1],
            "request.completion_time": [0.3],
            "request.token_times": [[0.1, 0.2, 0.2, 0.3]],
        },
    )
    assert r.size("request") == 1
