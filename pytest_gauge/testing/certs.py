"""A self-signed certificate for 127.0.0.1, for the loopback server's HTTPS (tests and benchmarks trust
it through ``SSL_CERT_FILE``); made with the ``openssl`` command every Debian machine has."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["self_signed"]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """``(certificate, key)`` PEM files in ``folder``, valid for ``127.0.0.1`` and ``localhost`` for a day."""
    cert, key = folder / "loopback-cert.pem", folder / "loopback-key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
