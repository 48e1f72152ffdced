"""Issue 31, part 3: saturated windows summarised as merged ranges — one line per chip and kind, a range
naming all the links that saturate together — not one line per window and link."""

from perfonto.analysis.saturation import compact, per_chip, ranges


def _iv(chip, link, t0, n=1, util=0.95, kind="link"):
    d = {"kind": kind, "chip": chip, "start_s": t0, "end_s": t0 + n * 1e-3, "windows": n, "peak_util": util}
    if kind == "link":
        d["link"] = link
    return d


def test_compact_link_lists():
    assert compact([0, 1, 2, 3, 5, 7, 8]) == "0–3, 5, 7–8" and compact([4]) == "4" and compact([]) == ""


def test_twelve_links_of_one_chip_at_once_are_one_range_and_one_chip_line():
    ivs = [_iv(0, link, t) for t in (0.017, 0.027, 0.042) for link in range(12)] + [_iv(1, 3, 0.5, n=4, util=0.99)]
    ivs += [_iv(2, None, 0.1, kind="pcie")]
    r = ranges(ivs)
    assert len(r) == 5 and r[0] == {
        "kind": "link",
        "chip": 0,
        "links": "0–11",
        "start_s": 0.017,
        "end_s": 0.017 + 1e-3,
        "windows": 1,
        "peak_util": 0.95,
    }
    pc = per_chip(ivs)
    assert [(x["chip"], x["kind"], x["links"], x["windows"], x["bursts"]) for x in pc] == [
        (1, "link", "3", 4, 1),
        (0, "link", "0–11", 3, 3),
        (2, "pcie", None, 1, 1),
    ]
    assert pc[1]["first_s"] == 0.017 and pc[1]["last_s"] == 0.042 + 1e-3 and pc[0]["peak_util"] == 0.99
