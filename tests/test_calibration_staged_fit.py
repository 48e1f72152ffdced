"""The calibration's two-stage fit (issue 30: MoE that holds): the constants every model's kernels share
are set by the dense rows alone, the MoE-only ones (all-to-all, expert imbalance) by the MoE rows with
those fixed — hand-worked on rows whose predictions are simple products of the constants."""

from __future__ import annotations

import math

import pytest

from perfonto.emulator import calibration
from perfonto.emulator.calibration import MOE_ONLY
from perfonto.emulator.calibration_rows import Row


class _A:
    """Assumptions stand-in: the fields given, ``replace`` returning a copy with changes."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def replace(self, **kw):
        return _A(**{**self.__dict__, **kw})


class _Prep:
    """A prepared row predicting ``100 × (mxu_eff_max / 0.5) × (a2a_eff / 0.4 for a MoE row)``."""

    def __init__(self, model: str, measured: float):
        self.row = Row(model, "h200", 8, "fp8", 128, 128, measured)
        self.cfg = type("C", (), {"a": _A()})()

    def predict(self, a, full: bool = True) -> float:
        moe = self.row.model.startswith("qwen3")
        return 100.0 * a.mxu_eff_max / 0.5 * (a.a2a_eff / 0.4 if moe else 1.0)


@pytest.mark.parametrize("moe_measured, a2a", [(100.0, 0.4), (50.0, 0.2)])
def test_dense_rows_set_the_shared_constants_and_moe_rows_only_their_own(moe_measured, a2a):
    # stage 1, dense row alone: 100 × x / 0.5 = 100 → mxu_eff_max = 0.5, whatever the MoE row says;
    # stage 2, x fixed at 0.5: 100 × y / 0.4 = moe_measured → a2a_eff = 0.4 × moe_measured / 100
    f = calibration.fit([_Prep("llama-3.1-8b", 100.0), _Prep("qwen3-235b-a22b", moe_measured)], starts=1)
    p = f["parameters"]
    assert p["mxu_eff_max"] == pytest.approx(0.5, abs=1e-3)
    assert p["a2a_eff"] == pytest.approx(a2a, abs=1e-3)
    assert f["residuals"] == pytest.approx([0.0, 0.0], abs=1e-3)
    assert set(MOE_ONLY) <= set(p) and list(p) == list(calibration.FITTED_BOUNDS)


def test_a_moe_row_the_moe_terms_cannot_reach_leaves_the_dense_constants_alone():
    # 300 measured needs a2a_eff = 1.2, above its bound 1: staged, a2a_eff stops at 1 and mxu_eff_max stays
    # at the dense row's 0.5 (the MoE row predicted 100 × 1 × 1/0.4 = 250, ln(250/300)); a joint fit would
    # raise mxu_eff_max to split the miss between the two rows
    f = calibration.fit([_Prep("llama-3.1-8b", 100.0), _Prep("qwen3-235b-a22b", 300.0)], starts=1)
    p = f["parameters"]
    assert p["mxu_eff_max"] == pytest.approx(0.5, abs=1e-3) and p["a2a_eff"] == 1.0
    assert f["residuals"] == pytest.approx([0.0, math.log(250 / 300)], abs=1e-3)
    joint = calibration.fit(
        [_Prep("llama-3.1-8b", 100.0), _Prep("qwen3-235b-a22b", 300.0)], names=list(calibration.FITTED_BOUNDS), starts=1
    )
    assert joint["parameters"]["mxu_eff_max"] > 0.52  # what staging prevents


def test_without_dense_rows_the_fit_is_joint():
    # one MoE row alone: the product x/0.5 · y/0.4 = 1/2 has a whole curve of solutions; the joint fit
    # lands on it (a staged fit would have had no dense row to set x)
    f = calibration.fit([_Prep("qwen3-235b-a22b", 50.0)], starts=1)
    p = f["parameters"]
    assert (p["mxu_eff_max"] / 0.5) * (p["a2a_eff"] / 0.4) == pytest.approx(0.5, rel=1e-3)


def test_a_constant_no_row_depends_on_keeps_its_design_value_and_is_named():
    # a bad-input pass: three FP8 dense rows wrote fp4_eff_ratio 0.9254, a2a_eff 0.7214 and
    # expert_imbalance 1.416 as fitted (where a random start left them); one row more moved them to
    # 0.4991, 0.6 and 1.0. Here the dense row's prediction reads mxu_eff_max alone.
    from perfonto.emulator.assumptions import Assumptions

    design = Assumptions()
    f = calibration.fit([_Prep("llama-3.1-8b", 100.0)], starts=3)
    p = f["parameters"]
    assert p["mxu_eff_max"] == pytest.approx(0.5, abs=1e-3) and "mxu_eff_max" not in f["unconstrained"]
    assert set(f["unconstrained"]) == set(calibration.FITTED_BOUNDS) - {"mxu_eff_max"}
    for n in f["unconstrained"]:
        assert p[n] == getattr(design, n), n
    assert list(p) == list(calibration.FITTED_BOUNDS)


class _Fp4MoePrep(_Prep):
    """A MoE row whose prediction also reads fp4_eff_ratio (an FP4 MoE row), a dense row's does not."""

    def predict(self, a, full: bool = True) -> float:
        base = super().predict(a, full)
        return base * (a.fp4_eff_ratio / 0.5 if self.row.model.startswith("qwen3") else 1.0)


def test_a_shared_constant_only_moe_rows_depend_on_is_fitted_on_them_not_called_loose():
    # the review: FP8 dense rows beside FP4 MoE rows wrote fp4_eff_ratio as 'no row depends on it'
    f = calibration.fit([_Fp4MoePrep("llama-3.1-8b", 100.0), _Fp4MoePrep("qwen3-235b-a22b", 100.0)], starts=1)
    assert "fp4_eff_ratio" not in f["unconstrained"] and "a2a_eff" not in f["unconstrained"]
    p = f["parameters"]
    assert (p["a2a_eff"] / 0.4) * (p["fp4_eff_ratio"] / 0.5) == pytest.approx(1.0, rel=1e-3)
    assert "expert_imbalance" in f["unconstrained"]
