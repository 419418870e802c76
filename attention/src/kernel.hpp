// The attribute of the fast path's hot loops (private to attention/).
#pragma once

// The hot kernels use FMA (2Prod). Built for baseline x86-64, std::fma would be a library call;
// target_clones compiles them for x86-64-v3 (AVX2 and FMA, which also lets GCC vectorize the loops over
// independent lanes) and for the baseline, and picks one at load time. The results are identical: every
// operation is the same IEEE operation lane by lane (no reassociation without -ffast-math), and std::fma
// is exact either way. As reference/src/fast_rounding does with an FMA clone.
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__FMA__) && \
    !defined(ROPECHECK_NO_FMA_CLONES)
#define ROPECHECK_ATTN_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ROPECHECK_ATTN_KERNEL
#endif

