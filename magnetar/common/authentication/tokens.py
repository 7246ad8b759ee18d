"""JSON Web Tokens as Pulsar's token authentication uses them (made and checked with PyJWT).

A token names its role in a claim (``sub`` unless ``token_auth_claim`` says otherwise) and may
expire (``exp``). HS256 tokens are signed with a secret key; RS256 and ES256 ones with a private
key and checked with the public one.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

_DURATION = re.compile(r"^(\d+)([smhdwy]?)$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
#: what a checked token may be signed with (never "none")
ALGORITHMS = ["HS256", "RS256", "ES256"]


class TokenError(ValueError):
    """A token that does not authenticate anyone, with the reason (expired, bad signature, …)."""


def expiry_seconds(value: str) -> int:
    """``pulsar tokens create --expiry-time``: 30s, 10m, 2h, 1d, 1w, 1y (a bare number: seconds)."""
    match = _DURATION.match(value.strip())
    if match is None:
        raise ValueError(f"invalid expiry time {value!r}: a number with s, m, h, d, w or y")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def create(
    key: bytes | PrivateKeyTypes, subject: str, *, expires_in_s: int | None = None, claim: str = "sub"
) -> str:
    claims: dict[str, Any] = {claim: subject}
    if expires_in_s is not None:
        claims["exp"] = int(time.time()) + expires_in_s
    return jwt.encode(claims, key, algorithm=_algorithm(key))  # type: ignore[arg-type]


def _algorithm(key: bytes | PrivateKeyTypes) -> str:
    if isinstance(key, bytes):
        return "HS256"
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ES256"
    raise TokenError(f"cannot sign tokens with a {type(key).__name__}")


@dataclass(frozen=True)
class Checked:
    role: str
    claims: dict[str, Any]


def expiry(token: str) -> float | None:
    """The ``exp`` of a token already checked (None: it has none, or it cannot be read)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) else None


def check(token: str, key: bytes | PublicKeyTypes, *, claim: str = "sub") -> Checked:
    """The role a token names, once its signature and expiry are checked; TokenError otherwise."""
    try:
        claims = jwt.decode(
            token,
            key,  # type: ignore[arg-type]
            algorithms=ALGORITHMS,
            options={"require": [claim], "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise TokenError("the token has expired") from None
    except jwt.InvalidSignatureError:
        raise TokenError("the token's signature does not match the broker's key") from None
    except jwt.MissingRequiredClaimError:
        raise TokenError(f"the token has no {claim!r} claim naming its role") from None
    except jwt.InvalidAlgorithmError:
        raise TokenError("the token is signed with an algorithm the broker's key cannot check") from None
    except jwt.DecodeError as exc:
        raise TokenError(f"not a valid token: {exc}") from None
    except jwt.InvalidTokenError as exc:
        raise TokenError(f"invalid token: {exc}") from None
    role = claims[claim]
    if not isinstance(role, str) or not role:
        raise TokenError(f"the token's {claim!r} claim is not a role name")
    return Checked(role, claims)


def show(token: str) -> dict[str, Any]:
    """Header and claims of a token, unchecked (``tokens show``)."""
    try:
        return {
            "header": jwt.get_unverified_header(token),
            "claims": jwt.decode(token, options={"verify_signature": False}),
        }
    except jwt.InvalidTokenError as exc:
        raise TokenError(f"not a valid token: {exc}") from None
