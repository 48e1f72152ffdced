"""``SourceCatalog.assumed_constant``: the one place where an importer registers a machine constant it
must assume (Intel constants, perf #literals)."""

from perfonto.interop.catalog import SourceCatalog


def _cat() -> SourceCatalog:
    return SourceCatalog("perf", "x.json", "g", "test")


def test_default_is_assumed_and_registered_once():
    cat = _cat()
    c = cat.assumed_constant("#slots", "slots", "perf literal #slots", (5.0, "as on N2"), {}, may_be_zero=False)
    assert (c.value, c.source, c.provenance, c.may_be_zero) == (5.0, "as on N2", "assumed", False)
    again = cat.assumed_constant("#slots", "slots", "other", (9.0, "other"), {"slots": 3.0}, may_be_zero=True)
    assert again is c and cat.constants == {"#slots": c}


def test_command_line_value_is_claimed():
    cat = _cat()
    c = cat.assumed_constant("#smt_on", "smt_on", "perf literal #smt_on", (1.0, "SMT"), {"smt_on": 0.0}, True)
    assert (c.key, c.name, c.value, c.provenance) == ("#smt_on", "smt_on", 0.0, "claimed")
    assert c.source == "given on the command line (--constant)" and c.may_be_zero
