#!/usr/bin/env python3
"""Self-check of the mpmath reference (mpmath_reference.py) against worked numbers in the research notes
(variants.md) and against structural identities. Plain asserts; run with `python3 <this file>`.
Prints one line per failed test and "N passed, M failed"; exits nonzero on any failure."""

from __future__ import annotations

import glob
import math
import os
import random
import sys
import traceback
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mpmath  # noqa: E402
from mpmath import mp, mpf  # noqa: E402

import mpmath_reference as ref  # noqa: E402

POS = [0, 1, 2, 7, 4095, 4096, 65537, 1 << 20, (1 << 24) - 1]


def rope_spec(name="t", **r):
    return {"name": name, "family": "rope", "rope": r}


def sin_spec(name="s", **s):
    return {"name": name, "family": "sinusoidal", "sinusoidal": s}


def close(a, b, tol):
    return abs(float(a) - float(b)) <= tol


def params(spec, seq_len=None, prec=256):
    rs = ref.parse_spec(spec)
    with mp.workprec(prec):
        return rs, ref.rope_params(rs, seq_len)


LLAMA31 = rope_spec("llama31", head_dim=128, base=500000.0, layout="half_split", max_position_embeddings=131072,
                    scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192})
LLAMA32 = rope_spec("llama32", head_dim=64, base=500000.0, layout="half_split", max_position_embeddings=131072,
                    scaling={"type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192})
DEEPSEEK = rope_spec("dsv3", head_dim=64, base=10000, layout="interleaved", max_position_embeddings=163840,
                     scaling={"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                              "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})
GPTOSS = rope_spec("gptoss", head_dim=64, base=150000, layout="half_split", max_position_embeddings=131072,
                   scaling={"type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                            "original_max_position_embeddings": 4096, "truncate": False})
QWEN25 = rope_spec("qwen25", head_dim=128, base=1000000.0, layout="half_split", max_position_embeddings=131072,
                   scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
PHI3 = rope_spec("phi3", head_dim=96, base=10000.0, layout="half_split", max_position_embeddings=131072,
                 scaling={"type": "longrope", "original_max_position_embeddings": 4096,
                          "short_factor": [1.0 + k / 100 for k in range(48)],
                          "long_factor": [1.0 + k / 10 for k in range(48)]})

# ------------------------------------------------------------------------------------------------------
# rounding helper
# ------------------------------------------------------------------------------------------------------


def test_rounding_ties():
    one = 1.0
    u = 2.0 ** -52
    with mp.workprec(400):
        cases = [
            (1 + mpf(2) ** -53, one),                         # tie -> even (down)
            (1 + 3 * mpf(2) ** -53, one + 2 * u),             # tie -> even (up)
            (1 + mpf(2) ** -53 + mpf(2) ** -300, one + u),    # just above the tie
            (1 + mpf(2) ** -53 - mpf(2) ** -300, one),        # just below the tie
            (-(1 + 3 * mpf(2) ** -53), -(one + 2 * u)),
            (mpf(2) ** -1075, 0.0),                          # subnormal tie -> 0 (even)
            (3 * mpf(2) ** -1075, 2.0 ** -1073),             # subnormal tie -> even (up)
            (mpf(2) ** -1075 + mpf(2) ** -1200, 2.0 ** -1074),
            (mpf(2) ** 1024, math.inf),
            ((2 ** 53 - mpf(1) / 2) * mpf(2) ** 971, math.inf),   # tie above DBL_MAX -> even = 2^1024
            ((2 ** 53 - mpf(3) / 4) * mpf(2) ** 971, sys.float_info.max),
        ]
        for x, want in cases:
            got = ref.to_binary64(x)
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (x, got, want)
    # the trap the helper avoids: mpmath's to_float defaults to rounding down
    with mp.workprec(400):
        t = 1 + 3 * mpf(2) ** -53
    assert mpmath.libmp.to_float(t._mpf_) == 1.0 + u          # round-down answer
    assert ref.to_binary64(t) == 1.0 + 2 * u


def test_rounding_random_vs_fraction():
    rnd = random.Random(1234)
    for _ in range(3000):
        bits = rnd.choice([54, 55, 60, 100, 300])
        man = rnd.getrandbits(bits) | 1
        if rnd.random() < 0.3:          # force exact ties
            man = (rnd.getrandbits(53) | (1 << 52)) * 2 + 1
        exp = rnd.choice([rnd.randint(-1200, -1000), rnd.randint(-300, 300), rnd.randint(900, 1000)])
        sign = rnd.choice([1, -1])
        x = mpmath.fmul(sign * man, mpmath.ldexp(1, exp), exact=True)
        frac = Fraction(sign * man) * (Fraction(2) ** exp)
        try:
            want = float(frac)          # CPython: correctly rounded, nearest-even, incl. subnormals
        except OverflowError:
            want = math.copysign(math.inf, sign)
        got = ref.to_binary64(x)
        assert got == want, (sign, man, exp, got, want)


def test_certify():
    with mp.workprec(300):
        tie = 1 + mpf(2) ** -53
        assert not ref.certify(tie, -250)                    # an exact tie is never certified
        assert ref.certify(mpf(1) / 3, -250)
        assert ref.certify(mpf(1), -250)
        assert ref.certify(mpf(0), -250)
        assert not ref.certify(tie + mpf(2) ** -260, -250)


def test_hex64():
    assert ref.hex64(1.0) == "0x1p+0"
    assert ref.hex64(3.0) == "0x1.8p+1"
    assert ref.hex64(0.0) == "0x0p+0"
    assert ref.hex64(-0.0) == "-0x0p+0"
    assert ref.hex64(-0.1) == "-0x1.999999999999ap-4"
    for v in (1e-310, 5e-324, 1.7976931348623157e308, math.pi):
        assert float.fromhex(ref.hex64(v)) == v


# ------------------------------------------------------------------------------------------------------
# worked numbers from variants.md
# ------------------------------------------------------------------------------------------------------

def bands(spec):
    _, p = params(spec)
    b = p.info["bands"]
    # cross-check the labels against the ratio inv / inv0
    f = spec["rope"]["scaling"]["factor"]
    for lab, v, v0 in zip(b, p.inv, p.inv0):
        r = v / v0
        if lab == "unchanged":
            assert r == 1
        elif lab == "divided":
            assert abs(r - mpf(1) / f) < mpf(2) ** -240
        else:
            assert mpf(1) / f < r < 1
    return b.count("unchanged"), b.count("smoothed"), b.count("divided")


def test_llama31_split():
    assert bands(LLAMA31) == (29, 6, 29), bands(LLAMA31)


def test_llama32_split():
    assert bands(LLAMA32) == (15, 3, 14), bands(LLAMA32)


def test_llama3_smoothing_is_continuous():
    # at the band edges the smoothed formula meets the neighbours: smooth = 0 -> inv/factor, 1 -> inv
    rs, p = params(LLAMA31)
    with mp.workprec(256):
        for j, lab in enumerate(p.info["bands"]):
            if lab == "smoothed":
                wl = 2 * mp.pi / p.inv0[j]
                smooth = (8192 / wl - 1) / 3
                assert 0 <= smooth <= 1


def test_deepseek_v3_yarn():
    rs = ref.parse_spec(DEEPSEEK)
    with mp.workprec(256):
        y = ref.yarn_params(rs)
        assert close(y["raw_low"], 10.4722, 5e-5) and close(y["raw_high"], 22.5134, 5e-5), y
        assert y["low"] == 10 and y["high"] == 23
        assert close(ref.get_mscale(mpf(40)), 1.368888, 5e-7)
        assert y["att"] == 1                                   # mscale / mscale_all_dim = 1
        assert close(ref.get_mscale(mpf(40)) ** 2, 1.873854, 5e-7)      # softmax scale (not ours)
        assert close(ref.get_mscale(mpf(40), mpf(0.707)) ** 2, 1.589626, 5e-7)
        _, p = params(DEEPSEEK)
        for j in range(32):
            if j <= 10:
                assert p.inv[j] == p.inv0[j]
            elif j >= 23:
                assert abs(p.inv[j] * 40 / p.inv0[j] - 1) < mpf(2) ** -240
            else:
                assert p.inv0[j] / 40 < p.inv[j] < p.inv0[j]


def test_gpt_oss_yarn():
    rs = ref.parse_spec(GPTOSS)
    with mp.workprec(256):
        y = ref.yarn_params(rs)
        assert close(y["low"], 8.092779, 5e-7) and close(y["high"], 17.398025, 5e-7), y
        assert y["low"] == y["raw_low"] and y["high"] == y["raw_high"]   # truncate false
        assert close(y["att"], 1.346574, 5e-7)
        assert close(y["att"], 0.1 * math.log(32) + 1, 1e-15)


def test_qwen25_yarn():
    rs = ref.parse_spec(QWEN25)
    with mp.workprec(256):
        y = ref.yarn_params(rs)
        assert close(y["raw_low"], 23.596, 5e-4) and close(y["raw_high"], 39.651, 5e-4), y
        assert y["low"] == 23 and y["high"] == 40
        assert close(y["att"], 1.138629, 5e-7)


def test_yarn_derived_factor():
    s = rope_spec(head_dim=128, base=1e6, layout="half_split", max_position_embeddings=131072,
                  scaling={"type": "yarn", "original_max_position_embeddings": 32768})
    rs = ref.parse_spec(s)
    with mp.workprec(256):
        y = ref.yarn_params(rs)
        assert y["factor"] == 4
        y2 = ref.yarn_params(ref.parse_spec(QWEN25))
        assert y["att"] == y2["att"] and y["low"] == y2["low"] and y["high"] == y2["high"]


def test_phi3_longrope_attention():
    _, p = params(PHI3)
    assert p.info["factor"] == 32
    assert close(p.att, 1.1902380714, 5e-11)
    with mp.workprec(256):
        assert abs(p.att - mpmath.sqrt(mpf(17) / 12)) < mpf(2) ** -240


def test_longrope_switch():
    sf = PHI3["rope"]["scaling"]["short_factor"]
    lf = PHI3["rope"]["scaling"]["long_factor"]
    for seq, lst in ((4096, sf), (4097, lf), (8192, lf), (1, sf)):
        _, p = params(PHI3, seq_len=seq)
        with mp.workprec(256):
            for j in (0, 5, 47):
                assert abs(p.inv[j] * mpf(lst[j]) / p.inv0[j] - 1) < mpf(2) ** -240, (seq, j)
    # no sequence length: short factors (SPEC_FORMAT, as HF at initialisation), even though L > L_orig
    _, p = params(PHI3)
    assert not p.info["use_long"]


def test_phimoe_mscale_follows_the_factor_switch():
    # Phi-3.5-MoE: short_mscale / long_mscale replace the derived sqrt(17/12) = 1.19024 (4.4 % lower);
    # each goes with the list of the same name, switched by the sequence length (SPEC_FORMAT longrope).
    sc = dict(PHI3["rope"]["scaling"], short_mscale=1.243163121016122, long_mscale=1.5)
    moe = rope_spec("phimoe", head_dim=96, base=10000.0, layout="half_split", max_position_embeddings=131072,
                    scaling=sc)
    for seq, att in ((None, 1.243163121016122), (4096, 1.243163121016122), (4097, 1.5), (131072, 1.5)):
        _, p = params(moe, seq_len=seq)
        assert p.att == mpf(att) and p.att_exact, (seq, p.att)
    # only the short one given: the long factors fall back to the derived value
    del sc["long_mscale"]
    _, p = params(moe, seq_len=8192)
    assert close(p.att, 1.1902380714, 5e-11)
    for bad in (0, -1.0, "1.2"):
        try:
            ref.parse_spec(rope_spec(head_dim=96, base=10000.0, layout="half_split", max_position_embeddings=131072,
                                     scaling=dict(sc, short_mscale=bad)))
        except ref.SpecError:
            continue
        raise AssertionError("accepted short_mscale %r" % (bad,))


def test_fairseq_lowest_frequency():
    s = sin_spec(d_model=512, layout="concatenated", frequencies="half_dim_minus_one")
    ss = ref.parse_spec(s)
    with mp.workprec(256):
        w = ref.sin_frequencies(ss)
        assert len(w) == 256
        assert abs(w[-1] - mpf(1) / 10000) < mpf(2) ** -250
        assert ref.to_binary64(w[-1]) == 1e-4
    s = sin_spec(d_model=512, layout="interleaved", frequencies="vaswani")
    with mp.workprec(256):
        w = ref.sin_frequencies(ref.parse_spec(s))
        assert close(w[-1], 1.0366e-4, 5e-9)


def test_sinusoidal_layouts():
    # d = 7 interleaved Vaswani: columns sin cos sin cos sin cos sin, w index c // 2
    r = ref.compute(sin_spec(d_model=7, layout="interleaved", frequencies="vaswani"), [3])
    pe = [v.mp for v in r.rows[0]["pe"]]
    with mp.workprec(256):
        w = [mpf(10000) ** (mpf(-2 * i) / 7) for i in range(4)]
        want = [mpmath.sin(3 * w[0]), mpmath.cos(3 * w[0]), mpmath.sin(3 * w[1]), mpmath.cos(3 * w[1]),
                mpmath.sin(3 * w[2]), mpmath.cos(3 * w[2]), mpmath.sin(3 * w[3])]
        assert all(abs(a - b) < mpf(2) ** -230 for a, b in zip(pe, want))
        # d = 7 concatenated: 4 sines then 3 cosines
        r = ref.compute(sin_spec(d_model=7, layout="concatenated", frequencies="vaswani"), [3])
        pe = [v.mp for v in r.rows[0]["pe"]]
        want = [mpmath.sin(3 * w[i]) for i in range(4)] + [mpmath.cos(3 * w[i]) for i in range(3)]
        assert all(abs(a - b) < mpf(2) ** -230 for a, b in zip(pe, want))
        # half_dim_minus_one d = 9: 4 frequencies base^(-i/3), zero column appended (both layouts)
        for lay in ("concatenated", "interleaved"):
            r = ref.compute(sin_spec(d_model=9, layout=lay, frequencies="half_dim_minus_one", position_offset=2),
                            [5])
            pe = [v.mp for v in r.rows[0]["pe"]]
            w = [mpf(10000) ** (mpf(-i) / 3) for i in range(4)]
            s_, c_ = [mpmath.sin(7 * x) for x in w], [mpmath.cos(7 * x) for x in w]
            want = (s_ + c_) if lay == "concatenated" else [v for i in range(4) for v in (s_[i], c_[i])]
            want.append(mpf(0))
            assert len(pe) == 9 and r.rows[0]["pe"][8].f64 == 0.0
            assert all(abs(a - b) < mpf(2) ** -230 for a, b in zip(pe, want))
            assert r.rows[0]["position"] == 5
        # d = 2 half_dim_minus_one: w_0 = 1
        r = ref.compute(sin_spec(d_model=2, layout="concatenated", frequencies="half_dim_minus_one"), [1])
        assert r.frequencies[0].f64 == 1.0 and r.rows[0]["pe"][0].f64 == math.sin(1.0)


# ------------------------------------------------------------------------------------------------------
# structural identities
# ------------------------------------------------------------------------------------------------------

def test_rotation_norm_and_layouts():
    x = [((-1) ** c) * (c + 1) / 7.0 for c in range(16)]
    hs = rope_spec(head_dim=16, base=10000, layout="half_split")
    il = rope_spec(head_dim=16, base=10000, layout="interleaved")
    perm = [0] * 16                       # interleaved index 2j+c  <->  half-split index c*8 + j
    for j in range(8):
        for c in range(2):
            perm[2 * j + c] = c * 8 + j
    xi = [x[perm[k]] for k in range(16)]
    a = ref.compute(hs, POS, x=x)
    b = ref.compute(il, POS, x=xi)
    for ra, rb in zip(a.rows, b.rows):
        for k in range(16):
            assert ra["rotated"][perm[k]].f64 == rb["rotated"][k].f64
        with mp.workprec(256):
            n0 = sum(mpf(v) ** 2 for v in x)
            n1 = sum(v.mp ** 2 for v in ra["rotated"])
            assert abs(n1 - n0) < mpf(2) ** -200
            for c, s in zip(ra["cos"], ra["sin"]):
                assert abs(c.mp ** 2 + s.mp ** 2 - 1) < mpf(2) ** -200
    # position 0 is the identity; position 1 cos/sin of pair 0 = cos(1), sin(1)
    assert [v.f64 for v in a.rows[0]["rotated"]] == x
    assert a.rows[1]["cos"][0].f64 == math.cos(1.0) and a.rows[1]["sin"][0].f64 == math.sin(1.0)


def test_partial_prefix_and_attention():
    x = [0.5 + c for c in range(10)]
    s = rope_spec(head_dim=10, rotary_dim=6, base=10000, layout="interleaved", max_position_embeddings=8192,
                  scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
                           "attention_factor": 1.5})
    r = ref.compute(s, [0, 9], x=x)
    assert r.attention_factor.f64 == 1.5
    assert len(r.frequencies) == 3 and len(r.rows[0]["cos"]) == 3
    for row in r.rows:
        assert [v.f64 for v in row["rotated"][6:]] == x[6:]        # pass-through, not scaled
    assert [v.f64 for v in r.rows[0]["rotated"][:6]] == [1.5 * v for v in x[:6]]


def test_proportional():
    s = rope_spec(head_dim=16, rotary_dim=8, base=1e6, layout="half_split",
                  scaling={"type": "proportional", "factor": 2.0})
    x = [1.0 + c for c in range(16)]
    r = ref.compute(s, [5], x=x)
    assert len(r.frequencies) == 8
    with mp.workprec(256):
        for j in range(8):
            want = mpf(1e6) ** (mpf(-2 * j) / 16) / 2 if j < 4 else mpf(0)
            assert abs(r.frequencies[j].mp - want) < mpf(2) ** -240
    row = r.rows[0]
    for j in range(4, 8):
        assert row["cos"][j].f64 == 1.0 and row["sin"][j].f64 == 0.0
        assert row["rotated"][j].f64 == x[j] and row["rotated"][j + 8].f64 == x[j + 8]
    assert row["rotated"][0].f64 != x[0] and row["rotated"][8].f64 != x[8]


def test_mrope_axes_and_equal_streams():
    rs = ref.parse_spec(rope_spec(head_dim=128, base=5e6, layout="half_split",
                                  mrope={"section": [24, 20, 20], "interleaved": True}))
    ax = ref.mrope_axes(rs)
    assert (ax.count(0), ax.count(1), ax.count(2)) == (24, 20, 20)
    assert ax[:6] == [0, 1, 2, 0, 1, 2] and ax[60:] == [0, 0, 0, 0]
    rs = ref.parse_spec(rope_spec(head_dim=128, base=1e6, layout="half_split", mrope={"section": [16, 24, 24]}))
    ax = ref.mrope_axes(rs)
    assert ax[15] == 0 and ax[16] == 1 and ax[39] == 1 and ax[40] == 2
    m = rope_spec(head_dim=24, base=1e6, layout="half_split", mrope={"section": [4, 4, 4]})
    one = rope_spec(head_dim=24, base=1e6, layout="half_split")
    x = [0.25 * c - 2 for c in range(24)]
    a = ref.compute(m, [(p, p, p) for p in POS], x=x)
    b = ref.compute(one, POS, x=x)
    for ra, rb in zip(a.rows, b.rows):
        assert [v.f64 for v in ra["rotated"]] == [v.f64 for v in rb["rotated"]]
    c = ref.compute(m, [(7, 4096, 65537)], x=x)
    for j in range(12):
        p = (7, 4096, 65537)[j // 4]
        assert c.rows[0]["cos"][j].f64 == ref.compute(one, [p], x=x).rows[0]["cos"][j].f64


def test_dynamic():
    s = rope_spec(head_dim=64, base=10000, layout="half_split", max_position_embeddings=2048,
                  scaling={"type": "dynamic", "factor": 2.0})
    none = rope_spec(head_dim=64, base=10000, layout="half_split")
    for sl in (None, 1, 2048):
        a = ref.compute(s, [4096], seq_len=sl)
        b = ref.compute(none, [4096])
        assert [v.f64 for v in a.frequencies] == [v.f64 for v in b.frequencies]
    _, p = params(s, seq_len=8192)
    with mp.workprec(256):
        bp = 10000 * (2 * mpf(8192) / 2048 - 1) ** (mpf(64) / 62)       # = 10000 * 7^(64/62)
        assert abs(p.info["base_prime"] / bp - 1) < mpf(2) ** -240
        assert abs(p.inv[5] - bp ** (mpf(-10) / 64)) < mpf(2) ** -240


def test_linear_and_none():
    s = rope_spec(head_dim=8, base=10000, layout="half_split", scaling={"type": "linear", "factor": 4.0})
    r = ref.compute(s, [1])
    assert [v.f64 for v in r.frequencies] == [1 / 4, 0.1 / 4, 0.01 / 4, 0.001 / 4]
    r = ref.compute(rope_spec(head_dim=8, base=10000, layout="half_split"), [1])
    assert [v.f64 for v in r.frequencies] == [1.0, 0.1, 0.01, 0.001]


def test_precision_formula_and_stability():
    assert ref.formula_precision(mpf((1 << 24) - 1)) == 256
    assert ref.formula_precision(mpmath.fsub(mpmath.ldexp(1, 200), 1, exact=True)) == 53 + 200 + 96
    assert ref.formula_precision(mpf(2) ** 200) == 53 + 201 + 96
    for spec in (LLAMA31, GPTOSS, PHI3):
        a = ref.compute(spec, [(1 << 24) - 1, 65537])
        b = ref.compute(spec, [(1 << 24) - 1, 65537], precision=a.precision + 160)
        assert a.precision == 256
        for ra, rb in zip(a.rows, b.rows):
            for key in ("cos", "sin", "rotated"):
                assert [v.f64 for v in ra[key]] == [v.f64 for v in rb[key]]


def test_exact_tie_at_position_zero():
    # att * x at position 0 is an exact product that may be a binary64 tie: must round to even, not loop
    x = [1 + 2.0 ** -52] * 2 + [3.0] * 2
    s = rope_spec(head_dim=4, base=10000, layout="half_split", max_position_embeddings=8192,
                  scaling={"type": "yarn", "factor": 2.0, "attention_factor": 1.5})
    r = ref.compute(s, [0], x=x)
    # 1.5 * (1 + 2^-52) = 1.5 + 1.5*2^-52: 2^-52 ulp at [1,2) -> tie between 1.5+2^-52 and 1.5+2^-51
    assert r.rows[0]["rotated"][0].f64 == 1.5 + 2.0 ** -51
    assert r.rows[0]["rotated"][2].f64 == 4.5


def test_spec_files_parse():
    dirs = [os.path.join(HERE, "specs"), os.path.join(HERE, "..", "..", "reference", "presets")]
    n = 0
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            spec = ref.load_spec(path)
            ref.parse_spec(spec)
            if os.path.basename(d) == "specs":
                assert spec["name"].startswith("x-") and spec["name"] + ".json" == os.path.basename(path)
            n += 1
    assert n > 0


def test_rejects_unknown_keys():
    for bad in (rope_spec(head_dim=8, base=10000, layout="half_split", scalling={}),
                rope_spec(head_dim=8, base=10000, layout="half_split", scaling={"type": "linear", "factr": 2}),
                rope_spec(head_dim=8, base=10000, layout="diagonal"),
                rope_spec(head_dim=7, base=10000, layout="half_split")):
        try:
            ref.parse_spec(bad)
        except ref.SpecError:
            continue
        raise AssertionError("accepted %r" % bad)


def main():
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
        except Exception:  # noqa: BLE001
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
