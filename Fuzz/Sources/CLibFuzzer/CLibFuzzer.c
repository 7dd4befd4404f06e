// Declarations only: the definition is in libFuzzer, linked by -sanitize=fuzzer.
#include "CLibFuzzer.h"
