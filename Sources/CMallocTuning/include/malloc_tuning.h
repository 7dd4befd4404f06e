#ifndef PREFETCH_MALLOC_TUNING_H
#define PREFETCH_MALLOC_TUNING_H

/// Serves allocations of at least `bytes` from their own mappings (glibc M_MMAP_THRESHOLD), which also turns
/// off glibc's adaptive threshold. Returns 1 on success, 0 where unsupported.
int prefetch_set_mmap_threshold(int bytes);

#endif
