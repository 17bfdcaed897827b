"""The Gemini endpoint: its public default and the check every explicit base URL must pass.

Kept apart from ``gemini.py`` so choosing and recording an endpoint does not import the SDK.
This module performs no I/O.
"""

from __future__ import annotations

import urllib.parse
from typing import Final

from harness.errors import ProviderSelectionError

__all__ = ["OPENAI_BASE_URL", "PUBLIC_BASE_URL", "check_base_url", "endpoint_host"]

PUBLIC_BASE_URL: Final = "https://generativelanguage.googleapis.com/"
OPENAI_BASE_URL: Final = "https://api.openai.com/v1"


def check_base_url(url: str) -> str:
    """Return ``url`` if it is a usable endpoint base: http(s), a host, no credentials, no query.

    Raises:
        ProviderSelectionError: naming what is wrong with the URL.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderSelectionError(
            f"--provider-base-url {url!r} must be an http:// or https:// URL with a host"
        )
    if parts.username is not None or parts.password is not None:
        raise ProviderSelectionError(
            "--provider-base-url must not embed credentials; use --credential-file or "
            "--credential-env"
        )
    if parts.query or parts.fragment:
        raise ProviderSelectionError(
            f"--provider-base-url {url!r} must not have a query or fragment"
        )
    return url


def endpoint_host(url: str) -> str:
    """The host of an endpoint URL, with its port when one is given (``localhost:8000``)."""
    return urllib.parse.urlsplit(url).netloc
