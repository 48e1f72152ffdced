"""Calibration rows that state their engine's sizing (issue 30: a second cited MoE source, the TensorRT-LLM
DeepSeek-R1 blog's max-throughput runs with --max_batch_size, --max_num_tokens, --num_requests)."""

from __future__ import annotations

import pytest

from perfonto.emulator.calibration_rows import Row, load_sources
from perfonto.emulator.serving import Engine

DS = "trtllm-blog-deepseek-r1-best-perf"


def test_a_row_with_its_engine_sizing_replays_that_engine():
    r = Row("deepseek-v3", "h200", 8, "fp8", 1024, 2048, 11489.2671, max_batch=128, token_budget=1151)
    r = Row(**{**r.__dict__, "num_requests": 5120, "kv_dtype": "bf16"})
    sc = r.scenario()
    assert sc == {
        "engine": Engine(max_batch=128, token_budget=1151, chunked_prefill=False),
        "num_requests": 5120,
        "kv_dtype": "bf16",
    }
    assert "max batch 128, 1151 tokens" in r.label and "KV bf16" in r.label


def test_a_row_without_engine_sizing_leaves_it_to_trtllm_bench():
    assert Row("llama-3.1-8b", "h100", 1, "fp8", 128, 128, 28312).scenario() == {}


@pytest.mark.parametrize(
    "extra, why",
    [
        ("max_batch: 128", "max_batch and token_budget come together"),
        ("token_budget: 1151", "max_batch and token_budget come together"),
        (
            "max_batch: 128, token_budget: 1151, num_requests: -1",
            "`num_requests` is a whole number between 0 and 1,000,000",
        ),
    ],
)
def test_a_half_stated_engine_is_refused(tmp_path, extra, why):
    p = tmp_path / "s.yaml"
    row = f"{{source: a, model: deepseek-v3, gpu: h200, tp: 8, dtype: fp8, isl: 1024, osl: 2048, value: 3, {extra}}}"
    p.write_text(f"sources: {{a: {{url: x, profile: trtllm}}}}\nrows:\n  - {row}\n")
    with pytest.raises(ValueError, match=why):
        load_sources(p)


def test_the_deepseek_rows_state_what_the_blog_ran():
    """Each row's lengths, engine sizing and request count are the blog's command line, and its
    concurrency fills every attention-DP rank's batch (ranks × max batch): offline, as replayed."""
    sources, rows = load_sources()
    q = " ".join(sources[DS]["quote"].split())
    ds = [r for r in rows if r.source == DS]
    assert {(r.gpu, r.dtype) for r in ds} == {("h200", "fp8"), ("b200", "fp4")}
    for r in ds:
        assert r.model == "deepseek-v3" and r.concurrency == 0 and r.tp == 8
        assert f"--input-mean {r.isl} --output-mean {r.osl}" in q
        assert f"--max_batch_size {r.max_batch} --max_num_tokens {r.token_budget} --num_requests {r.num_requests}" in q
        assert f"--concurrency {r.tp * r.max_batch}" in q
        assert f"Total Output Throughput (tokens/sec): {r.value}" in q


def test_a_rows_files_own_request_table_is_used(tmp_path):
    """The `num_requests` table of a --rows file was ignored for the shipped file's (a copy with 128/128:
    100 replayed 30,000 requests), and a bad entry in it was never looked at."""
    from perfonto.emulator.calibration_rows import load_rows
    from perfonto.emulator.project import default_requests

    row = "{model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 128, osl: 128, value: 3}"
    p = tmp_path / "r.yaml"
    p.write_text(f"num_requests:\n  128/128: 100\nrows:\n  - {row}\n")
    assert default_requests(128, 128) == 30000
    assert load_rows(p)[1][0].num_requests == 100
    p.write_text(f"num_requests:\n  128/128: 30000\nrows:\n  - {row}\n")
    assert load_rows(p)[1][0].num_requests == 0  # the default's count: the row is as the shipped one's
    for table, why in (
        ("  128/128: lots", "128/128: a whole number between 1 and 1,000,000 requests (got 'lots')"),
        ("  128/128: 100000000", "between 1 and 1,000,000"),
        ("  128x128: 100", "key '128x128' is not isl/osl"),
        ("  - 1", 'maps "isl/osl" to a request count'),
    ):
        p.write_text(f"num_requests:\n{table}\nrows:\n  - {row}\n")
        with pytest.raises(ValueError, match=f"{p}: `num_requests`") as exc:
            load_rows(p)
        assert why in str(exc.value), exc.value


ROW8B = "model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 128, osl: 128"


@pytest.mark.parametrize(
    "fields, why",
    [
        # a bad-input pass: 1e300 tok/s was fitted (every constant at a bound, a 300-digit error printed)
        ("value: 1.0e+300", "`value` is 1e+300: a group's output tokens/s is between 0.001 and 1e+09"),
        ("value: 1.0e-300", "`value` is 1e-300"),
        ("value: 3, concurrency: 4, ttft_ms: 1.0e+300", "`ttft_ms` is 1e+300: a mean TTFT in ms is between"),
        ("value: 3, concurrency: 4, itl_ms: 1.0e+9", "`itl_ms` is 1e+09: a mean ITL in ms"),
        ("value: 3, set: [1, 2]", "`set` is text (got list"),
        ("value: 3, cite: {a: 1}", "`cite` is text (got dict"),
    ],
)
def test_an_implausible_figure_or_a_field_of_another_type_is_refused(tmp_path, fields, why):
    from perfonto.emulator.calibration_rows import load_rows

    p = tmp_path / "r.yaml"
    p.write_text(f"rows:\n  - {{{ROW8B}, {fields}}}\n")
    with pytest.raises(ValueError, match=f"{p}:2: row 1") as exc:
        load_rows(p)
    assert why in str(exc.value), exc.value


def test_a_measurement_given_twice_is_refused_naming_both_rows(tmp_path):
    # counted twice in the fit (its constants moved), or two values for one measurement, silently
    from perfonto.emulator.calibration_rows import load_rows

    p = tmp_path / "r.yaml"
    rows = [f"{{{ROW8B}, value: 3}}", f"{{{ROW8B}, concurrency: 4, value: 3}}", f"{{{ROW8B}, value: 30}}"]
    p.write_text("rows:\n" + "".join(f"  - {r}\n" for r in rows))
    with pytest.raises(ValueError, match=r"r.yaml:4: row 3: the same measurement as line 2 \(row 1\)"):
        load_rows(p)
    p.write_text(f"rows:\n  - {{{ROW8B}, value: 3}}\n  - {{{ROW8B.replace('128, osl', '256, osl')}, value: 3}}\n")
    assert len(load_rows(p)[1]) == 2  # another length: another measurement
