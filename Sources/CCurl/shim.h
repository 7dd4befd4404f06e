#ifndef PREFETCH_CCURL_SHIM_H
#define PREFETCH_CCURL_SHIM_H
#include <curl/curl.h>
#endif
