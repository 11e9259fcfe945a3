"""The process's one TLS context, shared by every HTTPS client the package makes (the model client, the
HTTP agents, the doctor's and the tests' SDK clients)."""

from __future__ import annotations

import functools
import os
import ssl

__all__ = ["tls_context"]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's one TLS context: certifi's CAs, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as set when
    first asked. Made once and shared by every client: each new context loads the CA bundle again, 20-60
    ms of CPU (the doctor makes a client per model it checks)."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if not cafile and not capath:
        import certifi  # deferred: only a TLS connection needs the CA bundle's path

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
