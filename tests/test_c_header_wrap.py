"""The C header's wrap rule (caelius finding 2) and C identifiers that collide (finding 13).

A counter with a ``wrap_range`` wraps at its raw modulus, not at 2^width: ``energy`` is 32 bits at
1e-6 J per count with a 1000 J range, so it wraps at 1000 / 1e-6 = 1e9 raw counts. From prev 999,999,000
to cur 1,000 it rose by (1,000 - 999,999,000) mod 1e9 = 2,000 counts = 0.002 J; layout 1 of the header
gave only wrap_width 32, and mod 2^32 that is 3,294,969,296 counts = 3294.969296 J. A histogram's
buckets are 32-bit wrapping counters: layout 1 gave wrap_width 0.
"""

import shutil
import subprocess

import pytest

from perfonto.cli import main
from perfonto.codegen.c_header import generate_header
from perfonto.ontology.lint import lint_generation

from helpers import generation_from_yaml, one_block_yaml

SIGNALS = (
    '      energy: {kind: counter, unit: J, scale: 1.0e-6, width: 32, wrap_range: 1000.0 J, description: "uJ"}\n'
    '      evictions: {kind: counter, unit: event, width: 64, effective_width: 40, description: "40-bit count"}\n'
    '      sizes: {kind: histogram, unit: event, width: 32, buckets: [1024, 16384], bucket_unit: B, description: "b"}\n'
    '      depth: {kind: gauge, unit: request, description: "queue depth"}\n'
)


def _header(tmp_path) -> str:
    gen = generation_from_yaml(tmp_path / "w.yaml", one_block_yaml("w", SIGNALS, block="kvc"))
    return generate_header(gen)


def test_the_table_carries_the_wrap_modulus_and_the_bucket_width(tmp_path):
    text = _header(tmp_path)
    assert "#define PERFONTO_W_HEADER_LAYOUT 2u" in text
    assert "uint64_t wrap_modulus;" in text and "0: it wraps at 2^wrap_width" in text
    # name, unit, kind, width, wrap_width, instances, scale, wrap_modulus
    assert '{"kvc.energy", "J", 0u, 32u, 32u, 1u, 1e-06, UINT64_C(1000000000)}' in text  # 1000 J / 1e-6 J
    assert '{"kvc.evictions", "event", 0u, 64u, 40u, 1u, 1.0, UINT64_C(0)}' in text
    assert '{"kvc.sizes", "event", 3u, 32u, 32u, 3u, 1.0, UINT64_C(0)}' in text  # 3 bucket registers of 32 bits
    assert '{"kvc.depth", "request", 1u, 0u, 0u, 1u, 1.0, UINT64_C(0)}' in text


def test_a_c_consumer_takes_deltas_across_the_wrap(tmp_path):
    """Compiled with -std=c99 -pedantic -Werror and run: the deltas of the header's rule, by its helper and by
    hand from the table's fields. energy: 2,000 counts = 0.002 J (above); evictions (40 bits): from 2^40 - 5
    to 10 is 15; a bucket of sizes (32 bits): from 2^32 - 1 to 4 is 5."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on this machine: the header's wrap rule is checked as text only")
    (tmp_path / "w.h").write_text(_header(tmp_path))
    (tmp_path / "main.c").write_text(
        """#include <stdio.h>
#include "w.h"
static uint64_t by_hand(const struct perfonto_w_signal_info *s, uint64_t prev, uint64_t cur) {
    uint64_t m = s->wrap_modulus;
    if (m == 0u) return (cur - prev) & ((UINT64_C(1) << s->wrap_width) - 1u);
    return cur >= prev ? cur - prev : cur + (m - prev);
}
int main(void) {
    const struct perfonto_w_signal_info *e = &perfonto_w_signals[PERFONTO_W_SIG_KVC__ENERGY];
    const struct perfonto_w_signal_info *v = &perfonto_w_signals[PERFONTO_W_SIG_KVC__EVICTIONS];
    const struct perfonto_w_signal_info *h = &perfonto_w_signals[PERFONTO_W_SIG_KVC__SIZES];
    printf("%.6f %.6f\\n", (double)perfonto_w_raw_delta(e, 999999000u, 1000u) * e->scale,
           (double)by_hand(e, 999999000u, 1000u) * e->scale);
    printf("%llu %llu\\n", (unsigned long long)perfonto_w_raw_delta(v, (UINT64_C(1) << 40) - 5u, 10u),
           (unsigned long long)by_hand(v, (UINT64_C(1) << 40) - 5u, 10u));
    printf("%llu %llu\\n", (unsigned long long)perfonto_w_raw_delta(h, UINT64_C(4294967295), 4u),
           (unsigned long long)by_hand(h, UINT64_C(4294967295), 4u));
    return 0;
}
"""
    )
    exe = tmp_path / "wrap"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
    build = subprocess.run([cc, *flags, "main.c", "-o", str(exe)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True).stdout.split("\n")
    assert out[:3] == ["0.002000 0.002000", "15 15", "5 5"]


COLLIDE = (
    "generation: cid\ndescription: d\nclock_domains:\n"
    "  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: test}}\n"
    "blocks:\n"
    "  kvc:\n    description: a block\n    clock: core\n    signals:\n"
    '      a__b: {kind: counter, unit: event, width: 32, description: "first of the pair"}\n'  # line 10
    "  kvc__a:\n    description: another block\n    clock: core\n    signals:\n"
    '      b: {kind: counter, unit: event, width: 32, description: "second of the pair"}\n'  # line 15
)


def test_colliding_c_identifiers_are_a_check_error_at_the_second_signal(tmp_path, capsys):
    gen = generation_from_yaml(tmp_path / "cid.yaml", COLLIDE)
    clash = [d for d in lint_generation(gen) if d.code == "c-identifier"]
    assert len(clash) == 1 and clash[0].severity == "error"
    d = clash[0]
    assert (d.span.line, d.span.file) == (15, str(tmp_path / "cid.yaml"))
    assert "`kvc__a.b` and `kvc.a__b`" in d.message and "cid.yaml:10:" in d.message and "KVC__A__B" in d.message
    assert main(["check", "--catalog", str(tmp_path), "--no-library"]) == 1
    assert "cid.yaml:15:" in capsys.readouterr().out


def test_codegen_names_both_signals_where_they_collide(tmp_path):
    gen = generation_from_yaml(tmp_path / "cid.yaml", COLLIDE)
    with pytest.raises(ValueError) as exc:
        generate_header(gen)
    msg = str(exc.value)
    assert msg.startswith(f"{tmp_path / 'cid.yaml'}:15:") and "cid.yaml:10:" in msg
    assert "PERFONTO_CID_SIG_KVC__A__B" in msg


def test_distinct_names_do_not_collide(tmp_path):
    """`hbm.read_bytes` and `hbm_read.bytes` stay distinct (a dot is `__`, an underscore `_`)."""
    text = COLLIDE.replace("a__b:", "a_b:")
    gen = generation_from_yaml(tmp_path / "ok.yaml", text)
    assert not [d for d in lint_generation(gen) if d.code == "c-identifier"]
    assert "PERFONTO_CID_SIG_KVC__A_B = " in generate_header(gen)
