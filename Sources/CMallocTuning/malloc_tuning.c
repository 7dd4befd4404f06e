#include "malloc_tuning.h"
#include <stdlib.h> /* defines __GLIBC__ on glibc systems */

#if defined(__GLIBC__)
#include <malloc.h>

int prefetch_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
#else
int prefetch_set_mmap_threshold(int bytes) {
    (void)bytes;
    return 0;
}
#endif
