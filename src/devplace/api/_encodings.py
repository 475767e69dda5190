"""Kubernetes' encodings of values, as plain functions: base64 as a Secret's `data` holds it (`api.workloads`
checks a Secret with it; the node agent decodes the Secret values its discovery properties name without the
models).
"""

from __future__ import annotations

import base64
import binascii


def decode_base64(text: str) -> bytes:
    """The bytes of a Kubernetes base64 value (standard alphabet, padded); `ValueError` saying why otherwise."""
    if not text.isascii():
        raise ValueError("must be base64 (standard alphabet, padded): non-ASCII character")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise ValueError(f"must be base64 (standard alphabet, padded): {e}") from None
