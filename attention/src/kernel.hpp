// The attribute of the fast path's hot loops (private to attention/).
#pragma once

// The hot kernels use FMA (2Prod). Built for baseline x86-64, std::fma would be a library call;
// target_clones compiles them with and without FMA instructions and picks one at load time (the
// results are identical: std::fma is exact either way). As reference/src/fast_rounding.
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__FMA__) && \
    !defined(ROPECHECK_NO_FMA_CLONES)
#define ROPECHECK_ATTN_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ROPECHECK_ATTN_KERNEL
#endif

