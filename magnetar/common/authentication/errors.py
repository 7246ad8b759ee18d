"""What a provider raises when a caller is not who it claims."""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The caller is not who it claims (the message says why: no credentials, expired, …)."""
