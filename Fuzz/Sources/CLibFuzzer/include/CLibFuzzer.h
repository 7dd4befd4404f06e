// libFuzzer's driver entry point (compiler-rt's FuzzerInterface.h), called from each target's `main`.
//
// SwiftPM links an executable with `--defsym main=<Module>_main` and libFuzzer's own `main` never runs, so each
// fuzz target defines `<Module>_main` and hands its `LLVMFuzzerTestOneInput` to this driver.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));
