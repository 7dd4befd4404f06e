#ifndef PREFETCH_COPENSSL_SHIM_H
#define PREFETCH_COPENSSL_SHIM_H

// The system's libssl (OpenSSL 3), for the test upstream's TLS server only: an SSL_CTX with a PEM chain and key,
// one SSL per connection over two memory BIOs, the SNI name and the ALPN choice. Only PrefetchTestUpstreamTLS
// imports this module. Macros Swift cannot call are wrapped below as typed static inline functions.

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

/// SSL_CTX_set_min_proto_version (a macro over SSL_CTX_ctrl).
static inline int prefetch_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

#endif
