#ifndef PREFETCH_CCRYPTO_SHIM_H
#define PREFETCH_CCRYPTO_SHIM_H

// The system's libcrypto (OpenSSL 3), for digests only: the EVP digest API
// (EVP_MD_fetch, EVP_MD_CTX, EVP_DigestInit_ex / Update / Final_ex,
// EVP_MD_CTX_copy_ex). Only the Digests target imports this module; nothing
// deprecated in OpenSSL 3 is called.

#include <openssl/evp.h>
#include <stddef.h>

#endif
