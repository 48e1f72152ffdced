"""A packed register's field errors point at the field at fault and say what is wrong (an architect: all
four errors pointed at the first field's line, reversed bits [20, 18] were said not to fit in 32 bits,
and an overlap named no bits)."""

from __future__ import annotations

import pytest

from helpers import one_block_yaml
from perfonto.ontology import load_generation


def _errors(tmp_path, fields: str) -> list:
    sig = (
        "      status:\n        kind: packed\n        width: 32\n        description: link status\n"
        f"        fields:\n{fields}"
    )
    p = tmp_path / "g.yaml"
    p.write_text(one_block_yaml("g", sig))
    g, diags = load_generation(p)
    return [d for d in diags if d.code == "packed-fields"]


F = "          {name}: {{bits: [{lo}, {hi}], description: {name}}}\n"


@pytest.mark.parametrize(
    "first, second, line, message",
    [
        ((0, 15), (12, 27), 16, "fields `a` [0, 15] and `b` [12, 27] overlap in bit(s) 12..15"),
        ((0, 15), (15, 20), 16, "fields `a` [0, 15] and `b` [15, 20] overlap in bit(s) 15"),
        ((20, 18), (0, 3), 15, "field `a` bits [20, 18]: the first bit is above the last"),
        ((0, 3), (16, 40), 16, "field `b` bits [16, 40] do not fit in 32 bits"),
    ],
)
def test_a_field_error_is_at_the_field_and_says_what_is_wrong(tmp_path, first, second, line, message):
    fields = F.format(name="a", lo=first[0], hi=first[1]) + F.format(name="b", lo=second[0], hi=second[1])
    errs = _errors(tmp_path, fields)
    assert [e.message for e in errs] == [f"signal `b.status`: {message}"], [e.render() for e in errs]
    assert errs[0].span.line == line, errs[0].render()


def test_reversed_bits_are_not_also_an_overlap_and_say_how_to_write_them(tmp_path):
    errs = _errors(tmp_path, F.format(name="a", lo=20, hi=18) + F.format(name="b", lo=16, hi=31))
    assert len(errs) == 1 and errs[0].hint == "write [18, 20]"
