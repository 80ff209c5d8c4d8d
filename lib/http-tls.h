/* SPDX-License-Identifier: MIT */
/* The TLS transport of the HTTP client (GnuTLS), in its own library
 * (mlmon-tls) so that only mlmonctl links GnuTLS, not the daemon. It
 * verifies the peer's certificate against ep->ca_file (else the system's
 * trust store) and the host name of the endpoint. */
#pragma once

#include "http-transport.h"

extern const struct http_transport http_transport_tls;
