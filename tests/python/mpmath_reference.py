"""Independent mpmath reference for ropecheck (RoPE and sinusoidal position encodings).

Written only from core/SPEC_FORMAT.md and the research notes (variants.md sections 0, 1.1-1.7,
3.5 and 4); it deliberately shares no code with the C++ MPFR reference, so that agreement of the two,
bit for bit after rounding to binary64, is evidence that both compute the intended mathematics.

Everything is evaluated in exact mathematics, approximated with mpmath at a working precision of
    wp = max(256, 53 + ceil(log2(max_angle + 1)) + 96)  bits
and rounded ONCE to binary64, round to nearest, ties to even (``to_binary64``; we never use
``float(mpf)``, whose rounding depends on the context and on gradual underflow). A Ziv-style check
(``certify``) verifies that every rounded result is insensitive to a generous error bound; if not,
the whole computation is repeated at twice the precision.

Interpretation choices (where the spec text leaves room):

 * Numbers in a spec are read as binary64 (json floats, ints converted with float()) and that binary64
   value is exact: 0.707 means float('0.707'), never the decimal 0.707. List entries of longrope
   factors are binary64 too (not rounded to float32).
 * All derived quantities are exact real numbers, never rounded in between: the dynamic-NTK base',
   a derived factor L / L_orig (exact rational), the yarn correction range (ln, floor/ceil of the
   exact value), the yarn constants ``0.1`` in get_mscale and ``0.001`` (added to high when
   low == high) are the exact decimals 1/10 and 1/1000, the llama3 wavelengths 2*pi/inv.
 * Sequence length s (``--seq-len``): ``dynamic`` uses s' = max(s, L) with s defaulting to
   max_position_embeddings L (so no sequence length = no change); ``longrope`` uses the long factors
   iff a sequence length is given and s > L_orig, the short factors without one (SPEC_FORMAT, as
   Hugging Face at initialisation; LONGROPE_DEFAULT_SEQ_LEN = "max_position_embeddings" switches to
   s = L instead). Other types ignore s.
 * yarn: beta_fast / beta_slow given as 0 fall back to 32 / 1 (HF ``get(...) or default``); the
   derived attention factor uses get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) only
   when both keys are present and non-zero, else get_mscale(factor); get_mscale(s, m) = 1 for s <= 1.
   Correction range: corr(n) = R ln(L_orig / (2 pi n)) / (2 ln base); truncate -> floor/ceil;
   low = max(low, 0), high = min(high, R - 1); ramp[j] = clamp((j - low) / (high - low), 0, 1);
   inv[j] = inv0[j] * (1 - ramp[j]) + inv0[j] / factor * ramp[j].
 * llama3 follows HF's order of ``where``s: wl > L/low -> inv/factor; else wl < L/high -> inv;
   else smoothed (both band edges inclusive).
 * longrope: inv[j] = 1 / (ext[j] * base^(2j/R)); attention factor: long_mscale when the long factors
   are used, short_mscale with the short ones (the same sequence-length switch); when that key is
   absent, attention_factor if given, else 1 if factor <= 1, else sqrt(1 + ln(factor) / ln(L_orig)).
 * proportional: pairs over the whole head (P = head_dim / 2), inv[j] = base^(-2j/head_dim) / factor
   for j < rotary_dim / 2, exactly 0 otherwise; the layout applies over the whole head (half_split:
   (j, j + head_dim/2); interleaved: (2j, 2j+1)); attention factor 1.
 * Prefix partial rotary: layout applies within the first R channels, channels R..D-1 pass through
   unchanged (not multiplied by the attention factor).
 * MLA (DeepSeek; transformers DeepseekV3Attention splits q into [q_nope | q_pe]): rotary_offset o moves
   the block to channels o .. o+R-1 (pair j: (o+j, o+j+R/2) or (o+2j, o+2j+1)); the others pass through.
   key_layout "k_pe": the key is one R-wide vector per token, rotated as a head of R channels at offset 0.
 * Rotation: (a, b) -> (att*(a cos t - b sin t), att*(b cos t + a sin t)) evaluated exactly and
   rounded once; cos/sin are reported without the attention factor.
 * MRoPE: the axis of pair f is chosen on the frequency index f (after any scaling): chunked:
   f < t -> t, f < t + h -> h, else w; interleaved (Qwen3-VL): h if f % 3 == 1 and f < 3h, w if
   f % 3 == 2 and f < 3w, else t. Sections must sum to the pair count R/2. 1-D specs use the triple
   (p, p, p). ``mrope.interleaved`` defaults to false.
 * Sinusoidal: angle (p + position_offset) * w_i. vaswani: w_i = base^(-2i/d), i < ceil(d/2);
   half_dim_minus_one: w_i = base^(-i / max(d//2 - 1, 1)), i < d//2. interleaved + vaswani: column c
   is sin (c even) / cos (c odd) of w_{c//2}; concatenated + vaswani: ceil(d/2) sines of w_0.. then
   floor(d/2) cosines of w_0..; half_dim_minus_one: the even-d layout over d//2 frequencies and, for
   odd d, a zero column appended at the end (either layout). The row's reported position is the
   requested p (without the offset). An exact zero is +0.0.
 * Unknown keys are rejected, like the C++ reader is specified to.
"""

from __future__ import annotations

import json
import math
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import mpmath
from mpmath import mp, mpf

# What a longrope spec does without a sequence length: "none" (SPEC_FORMAT, as Hugging Face at
# initialisation: short factors) or "max_position_embeddings" (treat s = L, like dynamic).
LONGROPE_DEFAULT_SEQ_LEN = "none"

MIN_PRECISION = 256
GUARD_BITS = 96
# Error bound used by certify(): |computed - exact| <= scale * 2^(ERR_MARGIN_BITS - wp).
# The actual error is a handful of ulps at wp; 24 bits of margin is very generous.
ERR_MARGIN_BITS = 24
MAX_PRECISION = 1 << 14


class SpecError(ValueError):
    pass


# --------------------------------------------------------------------------------------------------
# Correct rounding to binary64
# --------------------------------------------------------------------------------------------------

def _round_man_exp(neg: bool, man: int, exp: int) -> float:
    """Round the exact value (-1)^neg * man * 2^exp (man >= 0 integer) to binary64, nearest-even.

    Handles gradual underflow (subnormals) with a single rounding and overflow to +-inf.
    """
    if man == 0:
        return -0.0 if neg else 0.0
    top = exp + man.bit_length() - 1          # 2^top <= |x| < 2^(top+1)
    q = max(top - 52, -1074)                  # exponent of the ulp of the result
    if exp >= q:
        n, e = man, exp                       # exact (fits in 53 bits at this exponent)
    else:
        shift = q - exp
        n = man >> shift
        rem = man - (n << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and (n & 1)):
            n += 1
        e = q
    try:
        r = math.ldexp(float(n), e)           # n <= 2^53: float(n) is exact
    except OverflowError:
        r = math.inf
    return -r if neg else r


def to_binary64(x) -> float:
    """Correctly rounded (nearest, ties to even) binary64 value of an mpf (exact, no context use)."""
    x = mpf(x) if not isinstance(x, mpf) else x
    sign, man, exp, _bc = x._mpf_
    if not man:
        if x._mpf_ == mpmath.libmp.fzero:
            return 0.0
        raise ValueError("non-finite value %r" % (x,))
    return _round_man_exp(bool(sign), int(man), int(exp))


def _mpf_parts(x: mpf) -> Tuple[bool, int, int]:
    sign, man, exp, _bc = x._mpf_
    return bool(sign), int(man), int(exp)


def certify(x: mpf, err_exp: int) -> bool:
    """True if every real in [x - 2^err_exp, x + 2^err_exp] rounds to the same binary64 as x.

    An mpf zero is taken as exact (our zeros only arise exactly: sin(0), zero frequencies,
    zero columns, a*1 - b*0 with a = 0)."""
    neg, man, exp = _mpf_parts(x)
    if man == 0:
        return True
    k = min(exp, err_exp)
    m = man << (exp - k)                     # |x| = m * 2^k
    e = 1 << (err_exp - k)                   # err = e * 2^k
    r = _round_man_exp(neg, m, k)
    lo = m - e
    hi = m + e
    if lo <= 0:
        return False
    return _round_man_exp(neg, lo, k) == r and _round_man_exp(neg, hi, k) == r


def hex64(v: float) -> str:
    """C printf("%a")-style hex of a binary64 (for messages; parsing is done with float.fromhex)."""
    if v == 0.0:
        return "-0x0p+0" if math.copysign(1.0, v) < 0 else "0x0p+0"
    h = v.hex()                              # e.g. 0x1.8000000000000p+1
    mant, _, ex = h.partition("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return mant + "p" + ex


def mp_str(x: mpf, digits: int = 40) -> str:
    return mpmath.nstr(x, digits, min_fixed=-5, max_fixed=8, strip_zeros=False)


# --------------------------------------------------------------------------------------------------
# Spec parsing and validation
# --------------------------------------------------------------------------------------------------

_TOP_KEYS = {"name", "family", "source", "notes", "rope", "sinusoidal"}
_ROPE_KEYS = {"head_dim", "rotary_dim", "rotary_offset", "key_layout", "base", "layout", "max_position_embeddings",
              "scaling", "mrope", "q_norm", "k_norm"}
_NORM_KEYS = {"eps", "weight_form", "weight"}
_SCALING_KEYS = {
    "none": set(),
    "linear": {"factor"},
    "dynamic": {"factor"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
             "mscale", "mscale_all_dim", "truncate"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
    "longrope": {"short_factor", "long_factor", "factor", "original_max_position_embeddings",
                 "attention_factor", "short_mscale", "long_mscale"},
    "proportional": {"factor"},
}
_MROPE_KEYS = {"section", "interleaved"}
_SIN_KEYS = {"d_model", "base", "layout", "frequencies", "position_offset"}


def _num(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError("%s must be a number, got %r" % (what, v))
    f = float(v)
    if not math.isfinite(f):
        raise SpecError("%s must be finite" % what)
    return f


def _int(v, what: str) -> int:
    if isinstance(v, bool):
        raise SpecError("%s must be an integer, got %r" % (what, v))
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int):
        raise SpecError("%s must be an integer, got %r" % (what, v))
    return v


def _check_keys(obj: dict, allowed: set, where: str) -> None:
    if not isinstance(obj, dict):
        raise SpecError("%s must be an object" % where)
    bad = sorted(set(obj) - allowed)
    if bad:
        raise SpecError("unknown key(s) in %s: %s" % (where, ", ".join(bad)))


@dataclass
class RopeSpec:
    name: str
    head_dim: int
    rotary_dim: int
    base: float
    layout: str
    max_pos: int
    scaling_type: str
    scaling: Dict[str, Any]
    mrope_section: Optional[Tuple[int, int, int]] = None
    mrope_interleaved: bool = False
    # MLA (SPEC_FORMAT.md "MLA"): the rotary block starts at channel rotary_offset; a "k_pe" key is one
    # rotary_dim-wide vector per token, rotated as that block alone.
    rotary_offset: int = 0
    key_layout: str = "per_head"
    # The Q/K RMSNorm stage (SPEC_FORMAT.md "q_norm / k_norm"): {"eps", "weight_form", "weight"} or None.
    # compute_rope rotates x as given; rms_norm() is the stage before it.
    q_norm: Optional[Dict[str, Any]] = None
    k_norm: Optional[Dict[str, Any]] = None

    @property
    def is_proportional(self) -> bool:
        return self.scaling_type == "proportional"

    @property
    def pairs(self) -> int:
        return self.head_dim // 2 if self.is_proportional else self.rotary_dim // 2

    @property
    def rotated_width(self) -> int:
        """Channels [0, rotated_width) take part in pairs; the rest pass through."""
        return self.head_dim if self.is_proportional else self.rotary_dim

    def pair_channels(self, j: int) -> Tuple[int, int]:
        w, o = self.rotated_width, self.rotary_offset
        if self.layout == "half_split":
            return o + j, o + j + w // 2
        return o + 2 * j, o + 2 * j + 1

    def key_spec(self) -> "RopeSpec":
        """The rotation a k_pe key takes: a head of rotary_dim channels at offset 0, the same frequencies."""
        if self.key_layout != "k_pe":
            return self
        return dataclasses.replace(self, head_dim=self.rotary_dim, rotary_offset=0, key_layout="per_head")


@dataclass
class SinSpec:
    name: str
    d_model: int
    base: float
    layout: str
    frequencies: str
    position_offset: int


def parse_spec(spec: dict):
    """Validate a spec dict (SPEC_FORMAT.md) and return a RopeSpec or SinSpec."""
    _check_keys(spec, _TOP_KEYS, "spec")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("name is required")
    fam = spec.get("family")
    if fam == "rope":
        if "sinusoidal" in spec:
            raise SpecError("rope spec must not have a 'sinusoidal' object")
        return _parse_rope(name, spec.get("rope"))
    if fam == "sinusoidal":
        if "rope" in spec:
            raise SpecError("sinusoidal spec must not have a 'rope' object")
        return _parse_sin(name, spec.get("sinusoidal"))
    raise SpecError("family must be 'rope' or 'sinusoidal', got %r" % (fam,))


def _parse_rope(name: str, r) -> RopeSpec:
    if r is None:
        raise SpecError("rope object is required")
    _check_keys(r, _ROPE_KEYS, "rope")
    for k in ("head_dim", "base", "layout"):
        if k not in r:
            raise SpecError("rope.%s is required" % k)
    D = _int(r["head_dim"], "head_dim")
    if D <= 0 or D % 2:
        raise SpecError("head_dim must be positive and even")
    R = _int(r.get("rotary_dim", D), "rotary_dim")
    if R <= 0 or R % 2 or R > D:
        raise SpecError("rotary_dim must be positive, even and <= head_dim")
    base = _num(r["base"], "base")
    if not base > 1:
        raise SpecError("base must be > 1")
    layout = r["layout"]
    if layout not in ("half_split", "interleaved"):
        raise SpecError("layout must be half_split or interleaved")
    L = _int(r.get("max_position_embeddings", 0), "max_position_embeddings")
    if L < 0:
        raise SpecError("max_position_embeddings must be >= 0")
    sc = r.get("scaling", {"type": "none"})
    if not isinstance(sc, dict) or "type" not in sc:
        raise SpecError("scaling must be an object with a type")
    typ = sc["type"]
    if typ not in _SCALING_KEYS:
        raise SpecError("unknown scaling type %r" % (typ,))
    _check_keys(sc, _SCALING_KEYS[typ] | {"type"}, "scaling(%s)" % typ)
    sc = dict(sc)
    rs = RopeSpec(name, D, R, base, layout, L, typ, sc)
    rs.rotary_offset = _int(r.get("rotary_offset", 0), "rotary_offset")
    if not 0 <= rs.rotary_offset <= D - R:
        raise SpecError("rotary_offset must be within 0 .. head_dim - rotary_dim")
    rs.key_layout = r.get("key_layout", "per_head")
    if rs.key_layout not in ("per_head", "k_pe"):
        raise SpecError("key_layout must be per_head or k_pe")
    if typ == "proportional" and (rs.rotary_offset or rs.key_layout != "per_head"):
        raise SpecError("the MLA layout is not valid with proportional scaling")
    for key in ("q_norm", "k_norm"):
        if key in r:
            setattr(rs, key, _parse_norm(r[key], key, D))
    P = rs.pairs
    if typ in ("linear", "dynamic", "llama3"):
        if "factor" not in sc:
            raise SpecError("%s scaling requires factor" % typ)
    for k in ("factor", "attention_factor", "low_freq_factor", "high_freq_factor", "beta_fast",
              "beta_slow", "mscale", "mscale_all_dim"):
        if k in sc:
            sc[k] = _num(sc[k], "scaling." + k)
    if "factor" in sc and not sc["factor"] > 0:
        raise SpecError("factor must be > 0")
    if "original_max_position_embeddings" in sc:
        sc["original_max_position_embeddings"] = _int(sc["original_max_position_embeddings"],
                                                      "original_max_position_embeddings")
        if sc["original_max_position_embeddings"] <= 0:
            raise SpecError("original_max_position_embeddings must be > 0")
    if "truncate" in sc and not isinstance(sc["truncate"], bool):
        raise SpecError("truncate must be a boolean")
    if typ == "dynamic":
        if L <= 0:
            raise SpecError("dynamic scaling needs max_position_embeddings")
        if R <= 2:
            raise SpecError("dynamic scaling needs rotary_dim > 2")
    if typ == "llama3":
        for k in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
            if k not in sc:
                raise SpecError("llama3 scaling requires %s" % k)
        if not (sc["low_freq_factor"] > 0 and sc["high_freq_factor"] > 0):
            raise SpecError("llama3 band factors must be > 0")
    if typ in ("yarn", "longrope"):
        if "original_max_position_embeddings" not in sc and L <= 0:
            raise SpecError("%s needs original_max_position_embeddings or max_position_embeddings" % typ)
        if "factor" not in sc and (L <= 0):
            raise SpecError("%s needs factor or max_position_embeddings" % typ)
    if typ == "longrope":
        for k in ("short_factor", "long_factor"):
            if k not in sc:
                raise SpecError("longrope requires %s" % k)
            lst = sc[k]
            if not isinstance(lst, list) or len(lst) != P:
                raise SpecError("longrope %s must be a list of %d numbers" % (k, P))
            sc[k] = [_num(v, k) for v in lst]
            if not all(v > 0 for v in sc[k]):
                raise SpecError("longrope %s entries must be > 0" % k)
        for k in ("short_mscale", "long_mscale"):
            if k in sc:
                sc[k] = _num(sc[k], "scaling." + k)
                if not sc[k] > 0:
                    raise SpecError("longrope %s must be > 0" % k)
    if "mrope" in r:
        m = r["mrope"]
        _check_keys(m, _MROPE_KEYS, "mrope")
        sec = m.get("section")
        if not isinstance(sec, list) or len(sec) != 3:
            raise SpecError("mrope.section must be [t, h, w]")
        sec = tuple(_int(v, "mrope.section") for v in sec)
        if any(v < 0 for v in sec):
            raise SpecError("mrope sections must be >= 0")
        if sum(sec) != R // 2 or rs.is_proportional:
            raise SpecError("mrope sections must sum to rotary_dim/2 (and proportional is not supported)")
        il = m.get("interleaved", False)
        if not isinstance(il, bool):
            raise SpecError("mrope.interleaved must be a boolean")
        rs.mrope_section = sec
        rs.mrope_interleaved = il
    return rs


def _parse_norm(n, where: str, D: int) -> Dict[str, Any]:
    _check_keys(n, _NORM_KEYS, where)
    eps = _num(n.get("eps"), where + ".eps") if "eps" in n else None
    if eps is None or not eps > 0:
        raise SpecError("%s.eps must be a number > 0" % where)
    form = n.get("weight_form", "w")
    if form not in ("w", "1+w"):
        raise SpecError("%s.weight_form must be \"w\" or \"1+w\"" % where)
    w = n.get("weight")
    if w is not None and (not isinstance(w, list) or len(w) != D):
        raise SpecError("%s.weight must be a list of head_dim numbers" % where)
    return {"eps": eps, "weight_form": form, "weight": None if w is None else [_num(v, where + ".weight") for v in w]}


def rms_norm(x: Sequence[float], norm: Dict[str, Any]) -> List[mpf]:
    """The RMSNorm stage at the current mp precision: x / sqrt(mean(x^2) + eps) * f, f = w or 1 + w
    (transformers Qwen3RMSNorm / Gemma3RMSNorm), eps taken as the binary64 value the spec holds."""
    xs = [mpf(v) for v in x]
    r = 1 / mp.sqrt(mp.fsum(v * v for v in xs) / len(xs) + mpf(norm["eps"]))
    f = [mpf(w) if norm["weight_form"] == "w" else 1 + mpf(w) for w in norm["weight"]]
    return [v * r * fc for v, fc in zip(xs, f)]


def _parse_sin(name: str, s) -> SinSpec:
    if s is None:
        raise SpecError("sinusoidal object is required")
    _check_keys(s, _SIN_KEYS, "sinusoidal")
    for k in ("d_model", "layout", "frequencies"):
        if k not in s:
            raise SpecError("sinusoidal.%s is required" % k)
    d = _int(s["d_model"], "d_model")
    if d < 2:
        raise SpecError("d_model must be >= 2")
    base = _num(s.get("base", 10000), "base")
    if not base > 1:
        raise SpecError("base must be > 1")
    if s["layout"] not in ("interleaved", "concatenated"):
        raise SpecError("sinusoidal layout must be interleaved or concatenated")
    if s["frequencies"] not in ("vaswani", "half_dim_minus_one"):
        raise SpecError("frequencies must be vaswani or half_dim_minus_one")
    off = _int(s.get("position_offset", 0), "position_offset")
    return SinSpec(name, d, base, s["layout"], s["frequencies"], off)


# --------------------------------------------------------------------------------------------------
# Exact mathematics (evaluated inside mp.workprec)
# --------------------------------------------------------------------------------------------------

@dataclass
class RopeParams:
    inv0: List[mpf]                  # unscaled inverse frequencies per pair
    inv: List[mpf]                   # after scaling
    att: mpf
    att_exact: bool = True           # att is known to be exactly the mpf value (1 or a spec number)
    info: Dict[str, Any] = field(default_factory=dict)


def get_mscale(s: mpf, m: mpf = mpf(1)) -> mpf:
    if s <= 1:
        return mpf(1)
    return m * mpmath.log(s) / 10 + 1


def effective_seq_len(rs: RopeSpec, seq_len: Optional[int]) -> Optional[int]:
    if seq_len is not None:
        return seq_len
    if rs.scaling_type == "longrope" and LONGROPE_DEFAULT_SEQ_LEN == "none":
        return None
    return rs.max_pos


def yarn_params(rs: RopeSpec) -> Dict[str, Any]:
    """Factor, L_orig, attention factor and correction range of a yarn spec (current precision)."""
    sc = rs.scaling
    R, L = rs.rotary_dim, rs.max_pos
    L_orig = sc.get("original_max_position_embeddings", L)
    factor = mpf(sc["factor"]) if "factor" in sc else mpf(L) / mpf(L_orig)
    if "attention_factor" in sc:
        att, att_exact = mpf(sc["attention_factor"]), True
    elif sc.get("mscale") and sc.get("mscale_all_dim"):
        att = get_mscale(factor, mpf(sc["mscale"])) / get_mscale(factor, mpf(sc["mscale_all_dim"]))
        att_exact = factor <= 1 or sc["mscale"] == sc["mscale_all_dim"]     # exactly 1 then
    else:
        att = get_mscale(factor)
        att_exact = factor <= 1
    beta_fast = mpf(sc.get("beta_fast") or 32)
    beta_slow = mpf(sc.get("beta_slow") or 1)
    lnb = mpmath.log(mpf(rs.base))

    def corr(n):
        return R * mpmath.log(mpf(L_orig) / (n * 2 * mp.pi)) / (2 * lnb)

    raw_low, raw_high = corr(beta_fast), corr(beta_slow)
    low, high = raw_low, raw_high
    if sc.get("truncate", True):
        low, high = mpmath.floor(low), mpmath.ceil(high)
    low = max(low, mpf(0))
    high = min(high, mpf(R - 1))
    if low == high:
        high += mpf(1) / 1000
    return {"factor": factor, "L_orig": L_orig, "att": att, "att_exact": att_exact,
            "raw_low": raw_low, "raw_high": raw_high, "low": low, "high": high}


def rope_params(rs: RopeSpec, seq_len: Optional[int] = None) -> RopeParams:
    """Frequencies and attention factor at the current mp precision."""
    sc, typ = rs.scaling, rs.scaling_type
    R, D, L = rs.rotary_dim, rs.head_dim, rs.max_pos
    lnb = mpmath.log(mpf(rs.base))
    info: Dict[str, Any] = {}
    att = mpf(1)
    att_exact = True
    if typ == "proportional":
        P, nrot = D // 2, R // 2
        inv0 = [mpmath.exp(-(2 * j) * lnb / D) for j in range(nrot)] + [mpf(0)] * (P - nrot)
        factor = mpf(sc.get("factor", 1.0))
        inv = [v / factor for v in inv0]
        return RopeParams(inv0, inv, att, True, info)

    P = R // 2
    inv0 = [mpmath.exp(-(2 * j) * lnb / R) for j in range(P)]
    if typ == "none":
        inv = list(inv0)
    elif typ == "linear":
        f = mpf(sc["factor"])
        inv = [v / f for v in inv0]
    elif typ == "dynamic":
        f = mpf(sc["factor"])
        s = effective_seq_len(rs, seq_len)
        s = max(s, L)
        X = f * s / L - (f - 1)
        lnb2 = lnb + mpf(R) / (R - 2) * mpmath.log(X)
        info["base_prime"] = mpmath.exp(lnb2)
        inv = [mpmath.exp(-(2 * j) * lnb2 / R) for j in range(P)]
    elif typ == "yarn":
        y = yarn_params(rs)
        info.update(y)
        att = y["att"]
        att_exact = y["att_exact"]
        low, high, factor = y["low"], y["high"], y["factor"]
        inv = []
        for j in range(P):
            ramp = (j - low) / (high - low)
            ramp = min(max(ramp, mpf(0)), mpf(1))
            inv.append(inv0[j] * (1 - ramp) + inv0[j] / factor * ramp)
    elif typ == "llama3":
        f = mpf(sc["factor"])
        lff, hff = mpf(sc["low_freq_factor"]), mpf(sc["high_freq_factor"])
        Lo = mpf(sc["original_max_position_embeddings"])
        low_wl, high_wl = Lo / lff, Lo / hff
        inv, bands = [], []
        for j in range(P):
            wl = 2 * mp.pi / inv0[j]
            if wl > low_wl:
                inv.append(inv0[j] / f)
                bands.append("divided")
            elif wl < high_wl:
                inv.append(inv0[j])
                bands.append("unchanged")
            else:
                if hff == lff:
                    raise SpecError("llama3: wavelength exactly on the band edge with high == low")
                smooth = (Lo / wl - lff) / (hff - lff)
                inv.append((1 - smooth) * inv0[j] / f + smooth * inv0[j])
                bands.append("smoothed")
        info["bands"] = bands
    elif typ == "longrope":
        L_orig = sc.get("original_max_position_embeddings", L)
        factor = mpf(sc["factor"]) if "factor" in sc else mpf(L) / mpf(L_orig)
        s = effective_seq_len(rs, seq_len)
        use_long = s is not None and s > L_orig
        ext = sc["long_factor"] if use_long else sc["short_factor"]
        info["use_long"] = use_long
        inv = [inv0[j] / mpf(ext[j]) for j in range(P)]
        mscale_key = "long_mscale" if use_long else "short_mscale"
        if mscale_key in sc:
            att = mpf(sc[mscale_key])
        elif "attention_factor" in sc:
            att = mpf(sc["attention_factor"])
        elif factor <= 1:
            att = mpf(1)
        else:
            att = mpmath.sqrt(1 + mpmath.log(factor) / mpmath.log(mpf(L_orig)))
            att_exact = False
        info["factor"] = factor
    else:  # pragma: no cover - validated earlier
        raise SpecError("unknown scaling type %r" % typ)
    return RopeParams(inv0, inv, att, att_exact, info)


def mrope_axes(rs: RopeSpec) -> List[int]:
    """Axis (0 = t, 1 = h, 2 = w) of every pair."""
    P = rs.pairs
    if rs.mrope_section is None:
        return [0] * P
    t, h, w = rs.mrope_section
    axes = []
    for f in range(P):
        if rs.mrope_interleaved:
            if f % 3 == 1 and f < 3 * h:
                axes.append(1)
            elif f % 3 == 2 and f < 3 * w:
                axes.append(2)
            else:
                axes.append(0)
        else:
            axes.append(0 if f < t else (1 if f < t + h else 2))
    return axes


def sin_frequencies(ss: SinSpec) -> List[mpf]:
    d = ss.d_model
    lnb = mpmath.log(mpf(ss.base))
    if ss.frequencies == "vaswani":
        n = (d + 1) // 2
        return [mpmath.exp(-(2 * i) * lnb / d) for i in range(n)]
    n = d // 2
    den = max(n - 1, 1)
    return [mpmath.exp(-i * lnb / den) for i in range(n)]


def sin_row(ss: SinSpec, w: List[mpf], q: int) -> Tuple[List[mpf], List[mpf]]:
    """PE row for the (offset-included) position q; also returns per-column error scale."""
    d = ss.d_model
    cs = [mp.cos_sin(q * wi) for wi in w]
    sc = [abs(q) * wi + 1 for wi in w]
    pe: List[mpf] = []
    scale: List[mpf] = []
    if ss.frequencies == "vaswani":
        if ss.layout == "interleaved":
            for c in range(d):
                i = c // 2
                pe.append(cs[i][1] if c % 2 == 0 else cs[i][0])
                scale.append(sc[i])
        else:
            ns = (d + 1) // 2
            for i in range(ns):
                pe.append(cs[i][1]); scale.append(sc[i])
            for i in range(d - ns):
                pe.append(cs[i][0]); scale.append(sc[i])
    else:
        n = d // 2
        if ss.layout == "interleaved":
            for i in range(n):
                pe += [cs[i][1], cs[i][0]]
                scale += [sc[i], sc[i]]
        else:
            pe += [cs[i][1] for i in range(n)] + [cs[i][0] for i in range(n)]
            scale += sc[:n] + sc[:n]
        if d % 2:
            pe.append(mpf(0)); scale.append(mpf(1))
    return pe, scale


# --------------------------------------------------------------------------------------------------
# Top-level computation with precision selection and certification
# --------------------------------------------------------------------------------------------------

Position = Any  # int for sinusoidal / 1-D rope, (t, h, w) tuple for rope


@dataclass
class Value:
    """One reference number: the mpf at the working precision and its binary64 rounding."""
    mp: mpf
    f64: float


@dataclass
class Result:
    family: str
    precision: int                 # precision of the final (certified) computation
    formula_precision: int         # max(256, 53 + ceil(log2(max angle + 1)) + 96)
    frequencies: List[Value]
    attention_factor: Optional[Value]
    rows: List[Dict[str, Any]]     # rope: position (t,h,w), cos, sin, rotated; sin: position, pe
    info: Dict[str, Any]


def _ceil_log2(y: mpf) -> int:
    """Exact ceil(log2(y)) for an mpf y > 0."""
    _neg, man, exp = _mpf_parts(y)
    bl = man.bit_length()
    if man == 1 << (bl - 1):          # exact power of two (mpf mantissas are odd, so man == 1)
        return exp + bl - 1
    return exp + bl


def formula_precision(max_angle: mpf) -> int:
    """max(256, 53 + ceil(log2(max_angle + 1)) + 96), with max_angle + 1 evaluated exactly."""
    y = mpmath.fadd(max_angle, 1, exact=True)
    return max(MIN_PRECISION, 53 + _ceil_log2(y) + GUARD_BITS)


def _positions3(rs: RopeSpec, positions: Sequence[Position]) -> List[Tuple[int, int, int]]:
    out = []
    for p in positions:
        if isinstance(p, (tuple, list)):
            if len(p) != 3:
                raise ValueError("multimodal position must be (t, h, w)")
            if rs.mrope_section is None and not (p[0] == p[1] == p[2]):
                raise ValueError("1-D rope spec given unequal position streams %r" % (p,))
            out.append(tuple(int(v) for v in p))
        else:
            out.append((int(p), int(p), int(p)))
    return out


def _rope_compute(rs: RopeSpec, pos3, x: Sequence[float], seq_len, prec: int):
    """Returns (Result-without-rounding pieces, list of (mpf, scale) for certification)."""
    checks: List[Tuple[mpf, mpf]] = []
    with mp.workprec(prec):
        prm = rope_params(rs, seq_len)
        axes = mrope_axes(rs)
        att = prm.att
        for v in prm.inv:
            checks.append((v, abs(v)))
        checks.append((att, abs(att)))
        xs = [mpf(v) for v in x]
        rows = []
        for p in pos3:
            cos_l, sin_l = [], []
            out: List[Optional[mpf]] = list(xs)          # pass-through channels copied unchanged
            oscale: List[mpf] = [mpf(0)] * len(xs)
            for j, inv in enumerate(prm.inv):
                pj = p[axes[j]]
                ang = pj * inv
                c, s = mp.cos_sin(ang)
                # error scale; an exactly zero angle gives exact cos = 1, sin = 0 (scale 0 = exact)
                es = abs(ang) + 1 if ang != 0 else mpf(0)
                cos_l.append(c); sin_l.append(s)
                checks.append((c, es)); checks.append((s, es))
                c1, c2 = rs.pair_channels(j)
                a, b = xs[c1], xs[c2]
                o1 = att * (a * c - b * s)
                o2 = att * (b * c + a * s)
                out[c1], out[c2] = o1, o2
                if ang == 0 and prm.att_exact:
                    rsc = mpf(0)                          # att * a, att * b: exact products
                else:
                    rsc = abs(att) * (abs(a) + abs(b)) * (es + 1)
                oscale[c1] = oscale[c2] = rsc
                checks.append((o1, rsc)); checks.append((o2, rsc))
            rows.append((p, cos_l, sin_l, out))
    return prm, rows, checks


def _certified(checks, prec: int) -> bool:
    for v, scale in checks:
        if scale == 0:
            continue
        # err <= scale * 2^(margin - prec) <= 2^(ceil(log2 scale) + margin - prec)
        _s, man, exp = _mpf_parts(mpf(scale))
        err_exp = exp + man.bit_length() + ERR_MARGIN_BITS - prec
        if not certify(v, err_exp):
            return False
    return True


def compute_rope(rs: RopeSpec, positions: Sequence[Position], x: Sequence[float],
                 seq_len: Optional[int] = None, precision: Optional[int] = None) -> Result:
    if len(x) != rs.head_dim:
        raise ValueError("input vector has %d entries, head_dim is %d" % (len(x), rs.head_dim))
    pos3 = _positions3(rs, positions)
    with mp.workprec(MIN_PRECISION):
        prm = rope_params(rs, seq_len)
        max_inv = max([abs(v) for v in prm.inv] + [mpf(0)])
    max_pos = max([abs(v) for p in pos3 for v in p] + [0])
    fprec = formula_precision(mpmath.fmul(max_inv, max_pos, exact=True))
    prec = precision or fprec
    while True:
        prm, rows, checks = _rope_compute(rs, pos3, x, seq_len, prec)
        if precision is not None or _certified(checks, prec):
            break
        if prec >= MAX_PRECISION:
            raise RuntimeError("could not certify the rounding of %s at %d bits" % (rs.name, prec))
        prec *= 2
    R = lambda v: Value(v, to_binary64(v))
    res_rows = []
    for p, cl, sl, out in rows:
        res_rows.append({"position": list(p), "cos": [R(v) for v in cl], "sin": [R(v) for v in sl],
                         "rotated": [R(v) for v in out]})
    return Result("rope", prec, fprec, [R(v) for v in prm.inv], R(prm.att), res_rows, prm.info)


def compute_sinusoidal(ss: SinSpec, positions: Sequence[int], precision: Optional[int] = None) -> Result:
    qs = [int(p) + ss.position_offset for p in positions]
    # w_0 = 1 is the largest frequency, so the largest angle is max |p + offset|
    fprec = formula_precision(mpmath.fadd(max([abs(q) for q in qs] + [0]), 0, exact=True))
    prec = precision or fprec
    while True:
        checks = []
        with mp.workprec(prec):
            w = sin_frequencies(ss)
            checks += [(v, abs(v)) for v in w]
            rows = []
            for q in qs:
                pe, scale = sin_row(ss, w, q)
                checks += list(zip(pe, scale))
                rows.append(pe)
        if precision is not None or _certified(checks, prec):
            break
        if prec >= MAX_PRECISION:
            raise RuntimeError("could not certify the rounding of %s at %d bits" % (ss.name, prec))
        prec *= 2
    R = lambda v: Value(v, to_binary64(v))
    res_rows = [{"position": int(p), "pe": [R(v) for v in pe]} for p, pe in zip(positions, rows)]
    return Result("sinusoidal", prec, fprec, [R(v) for v in w], None, res_rows, {})


def compute(spec: dict, positions: Sequence[Position], x: Optional[Sequence[float]] = None,
            seq_len: Optional[int] = None, precision: Optional[int] = None) -> Result:
    """Reference values for a spec dict. ``x`` (rope only) is the vector to rotate."""
    ps = parse_spec(spec)
    if isinstance(ps, RopeSpec):
        if x is None:
            x = default_input(ps.head_dim)
        return compute_rope(ps, positions, x, seq_len, precision)
    return compute_sinusoidal(ps, positions, precision)


def default_input(D: int) -> List[float]:
    """A deterministic test vector (only used when no input is supplied)."""
    return [((-1) ** c) * (1.0 + c / 8.0) / 3.0 for c in range(D)]


def load_spec(path: str) -> dict:
    with open(path) as f:
        return json.load(f)
