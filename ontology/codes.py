"""Every diagnostic code perfonto reports, with its one-line meaning — one registry for all layers.

A ``Diagnostic`` refuses a code that is not here (a programming error, caught by the tests), so the
list in the docs (``perfonto codes``, the docs site's ``diagnostics.md``) is complete by construction.
Codes are kebab-case; ``lint-*`` codes are warnings about style, the others mostly errors.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    # files and YAML
    "io": "a file or folder cannot be read or written",
    "not-utf8": "a file is not UTF-8 text",
    "yaml-syntax": "malformed YAML (or a NUL character in it)",
    "yaml-empty": "a YAML file holds no document",
    "yaml-multi-doc": "a YAML file holds more than one document",
    "yaml-duplicate-key": "a key appears twice in one YAML mapping",
    "yaml-too-deep": "a YAML document is nested too deeply to read",
    "yaml-too-large": "a YAML document expands past the size limit (alias bomb)",
    "yaml-unsupported": "a YAML feature perfonto does not accept (tags, recursive aliases, non-string keys)",
    "schema": "a catalog file does not have the shape its JSON Schema describes",
    "missing-field": "a required key is absent",
    "unknown-field": "a key the model does not know (see the did-you-mean)",
    # generations and signals
    "unknown-generation": "no generation of that name is shipped or in the catalog folder",
    "duplicate-generation": "two files of a catalog folder declare the same generation",
    "empty-catalog": "a catalog folder holds no ontology YAML and no metric files",
    "extends-cycle": "generations extend each other in a cycle",
    "reserved-name": "a block or signal uses a name reserved by the language (spec, interval, …)",
    "unknown-clock": "a signal or spec constant names a clock domain the generation does not declare",
    "clock-domain-mismatch": "a cycle counter's unit is not its clock domain's cycle",
    "missing-unit": "a signal or constant has no unit",
    "unknown-unit": "a unit expression pint cannot parse in perfonto's registry",
    "spec-value": "a spec constant is not a finite positive number",
    "counter-width": "a counter's register width is missing or outside 1..64",
    "instances": "a block's instance axes (with a histogram's buckets) multiply to more registers than a chip can have",
    "effective-width": "a counter's effective width is not within its storage width",
    "gauge-width": "a gauge declares a register width (gauges are levels and never wrap)",
    "max-rate": "a `max_rate` on a signal that is not a counter, or one that is not a positive rate",
    "sensor": "an `averaging_window` that is not a positive time on a gauge, or a `cross_check` that does not pair "
    "an energy counter with a power gauge",
    "sentinel": "a sentinel value does not fit the register",
    "wrap-range": "a counter's `wrap_range` is not a whole number of raw counts above 1 within its register",
    "reset-indicator": "a `reset_indicator_kind` without an indicator, or one indicator read as two kinds",
    "scale-field": "a counter's `scale_field` is not a dimensionless packed field of a matching register",
    "scale-field-override": "a child generation changes a signal's unit but not the `scale_field` it inherits",
    "slots": "a block's `slots` name an axis it does not have, or a slot outside the axis",
    "counter-slots": "a block's `counter_slots` or `group_constraints` name something that is not one of its counters",
    "histogram-buckets": "a histogram's bucket edges are not increasing",
    "packed-fields": "a packed register's fields overlap, leave its width or are missing",
    "counter-across-chips": "a counter declares `across_chips` (counters always sum across chips)",
    "counted-by": "`counted_by: leader` on a signal that is not a counter",
    "signal-id": "a signal's C header id is given twice (or reuses a removed signal's)",
    "c-identifier": "two signals (or packed fields) map to the same C header identifier (`kvc.a__b`, `kvc__a.b`)",
    "emulator-binding": "a signal's `emulator:` binding has the wrong shape (kind, split, coefficients) for the signal",
    "unknown-quantity": "an emulator binding names a quantity the emulator does not have, or one of the wrong kind",
    "stability": "a stability or rename declaration is inconsistent",
    "rename-target": "a `renamed:` entry's new name is taken (a signal of the parent, a new signal of the same file, "
    "or another rename's target)",
    "scope": "a spec constant's scope is used against an amount of another scope",
    "scope-rollup": "a mean over a block's instances divided by a chip-wide total over them (or the reverse)",
    "level-rate": "a gauge or packed field (a level) divided by the window's duration: no rate",
    "sparsity": "dense work divided by a sparse peak (or the reverse)",
    # metric language and compiler
    "syntax": "the metric file does not parse (the token, what was expected, a caret)",
    "too-deep": "an expression is nested too deeply to parse or compile",
    "too-large": "a metric declaration (formula and description) is past the size limit; refused before parsing",
    "metric-name": "a metric name is not dotted lower-case snake_case",
    "duplicate-name": "a metric is defined twice or takes the name of a signal or constant",
    "unknown-name": "a formula reads a name that is not a signal, field, constant or metric",
    "unknown-parent": "`extends` names a generation that is neither next to the file nor shipped",
    "unknown-function": "a call to a function the language does not have",
    "arity": "a function called with the wrong number of arguments",
    "cycle": "metrics depend on each other in a cycle",
    "rollup": "a declared rollup other than max or min, or a rollup over nothing",
    "parent-cycle": "a metric is its own ancestor through `parent` clauses (the top-down tree has a loop)",
    "parent-unit": "a top-down child whose unit is not of its parent's dimension (children are shares of it)",
    "unit-mismatch": "units that cannot be converted (declared unit, addition, comparison)",
    "axes-mismatch": "an operation between values over different instance axes, not rolled up",
    "chip-degree": "a metric that scales as chips^k with k not 0 or 1, or adds unlike degrees",
    "type": "an operand of the wrong kind: a condition where a quantity is needed, a non-literal exponent, a list of "
    "instants",
    "bool-metric": "a metric whose formula is a condition, not a quantity",
    "bounds-order": "bounds written HIGH .. LOW",
    "population": "request/token records combined with counter windows",
    "packed-word": "a formula reads a packed register's whole word instead of one of its fields",
    "clamp-order": "`clamp(x, lo, hi)` with literal bounds lo > hi (the result is always hi)",
    "div-zero": "a division by a literal expression equal to zero (always null)",
    "total-times-ratio": "a per-chip total multiplied or divided by a measured ratio (its server value means nothing)",
    "renamed-signal": "a formula reads a signal by its old name (resolved through the alias)",
    "deprecated-signal": "a formula reads a deprecated signal",
    "removed-signal": "a metric of the catalog folder reads a signal its generation removed (it is unavailable there)",
    # lint (warnings)
    "lint-description": "a metric or signal without a description",
    "lint-source": "a metric without the source of its formula",
    "lint-spec-near-miss": "a spec constant new in a child generation, close to an inherited one (a misspelt override)",
    "lint-counter-rate": "a counter whose unit is a rate (a counter counts an amount; rates are metrics)",
    "lint-wrap-period": "a counter its max_rate (or, lacking one, its block's lowest peak) wraps within a 1 ms sample",
    "lint-summed-temperature": "a gauge in a unit of temperature summed across chips (`across_chips: sum`)",
    "threshold-bounds": "a threshold outside the metric's declared bounds (it never fires, or always does)",
    "lint-flop-coverage": "a metric reads some of a block's FLOP counters but not all (that work is left out)",
    "percent-times-100": "a metric declared in percent multiplies by 100 (perfonto converts to percent itself)",
    # what-if studies (perfonto coverage)
    "scenario": "a coverage scenario the emulator cannot run as written (unknown key or knob, bad value)",
    # test vectors
    "vector-input": "a test vector's inputs do not match the generation's signals",
    "vector-expect": "a test vector expects a metric that does not exist, or a malformed value",
    "vector-records": "a test vector's request records are malformed (or their token times disagree with their counts)",
    "vector-bounds": "a test vector expects a value outside the metric's declared bounds",
    # finding rules (*.findings.yaml)
    "finding-file": "a findings file is not a mapping with one key, `findings`, a list of rules",
    "finding-field": "a finding rule lacks `metric` or `title`, has an unknown key, or a malformed value",
    "finding-knob": "a finding rule's `remove` names a knob the emulator does not have",
    "finding-unknown-metric": "a finding rule names a metric the catalog does not define",
    "finding-share-unit": "a finding rule's `share` metric is not a percent or fraction of time",
    "finding-never-fires": "a finding rule's metric declares no threshold, so the finding never fires (a warning)",
    # report declarations (`report:` in a generation's YAML)
    "report-unknown-metric": "a generation's `report:` (headline, groups, per_chip) names a metric the catalog does "
    "not define",
    "report-axes": "a generation's `report:` names a metric over instance axes (the tables show run-level scalars)",
}


def meaning(code: str) -> str:
    """The one-line meaning of ``code``; raises ``KeyError`` for an unregistered code."""
    return CODES[code]


def check_code(code: str) -> None:
    """Raise ``ValueError`` when ``code`` is not registered (add it, with its meaning, above)."""
    if code not in CODES:
        raise ValueError(
            f"diagnostic code `{code}` is not registered in perfonto/ontology/codes.py; add it with its meaning"
        )
