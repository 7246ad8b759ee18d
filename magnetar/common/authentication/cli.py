"""``magnetar tokens``: secret keys, key pairs and tokens, in ``pulsar tokens``' shape."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import click

from magnetar.common.authentication import keys, tokens


def _write(data: bytes, output: str | None) -> None:
    if output is None:
        sys.stdout.buffer.write(data + (b"" if data.endswith(b"\n") else b"\n"))
    else:
        path = Path(output)
        path.write_bytes(data)
        path.chmod(0o600)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  magnetar tokens create-secret-key --output my-secret.key
  magnetar tokens create --secret-key file:///path/to/my-secret.key --subject test-user
  magnetar tokens create --secret-key file:///path/to/my-secret.key --subject app --expiry-time 1d
  magnetar tokens create-key-pair --output-private-key my-private.key --output-public-key my-public.key
  magnetar tokens create --private-key file:///path/to/my-private.key --subject test-user
  magnetar tokens show -i "$TOKEN"
  magnetar tokens validate --secret-key file:///path/to/my-secret.key -i "$TOKEN"
The broker takes the key as token_secret_key (or token_public_key) with
authentication_enabled=true and authentication_providers=token.""",
)
def tokens_command() -> None:
    """Make keys and tokens for token authentication (as ``pulsar tokens``)."""


@tokens_command.command("create-secret-key")
@click.option("-o", "--output", help="File to write the key to (default: standard output, base64).")
@click.option("-b", "--base64", "as_base64", is_flag=True, help="Write the key base64-encoded.")
def create_secret_key(output: str | None, as_base64: bool) -> None:
    """A new HS256 secret key (32 random bytes)."""
    key = keys.new_secret_key()
    _write(base64.b64encode(key) if as_base64 or output is None else key, output)


@tokens_command.command("create-key-pair")
@click.option("--output-private-key", required=True, help="File for the private key (DER, PKCS#8).")
@click.option("--output-public-key", required=True, help="File for the public key (DER, X.509).")
@click.option("-a", "--signature-algorithm", type=click.Choice(["RS256", "ES256"]), default="RS256",
              show_default=True)  # fmt: skip
def create_key_pair(output_private_key: str, output_public_key: str, signature_algorithm: str) -> None:
    """A new key pair: sign tokens with the private key, give brokers the public one."""
    private, public = keys.new_key_pair(signature_algorithm)
    _write(private, output_private_key)
    _write(public, output_public_key)


@tokens_command.command("create")
@click.option("-s", "--subject", required=True, help="The role the token names.")
@click.option("--secret-key", help="Key to sign with (HS256): data:;base64,…, file:///path or a path.")
@click.option("--private-key", help="Key to sign with (RS256/ES256): file:///path or a path.")
@click.option("-e", "--expiry-time", help="Valid for this long: 30s, 10m, 2h, 1d, 1w, 1y (default: forever).")
@click.option("--claim", default="sub", show_default=True, help="Claim naming the role (token_auth_claim).")
def create(subject: str, secret_key: str | None, private_key: str | None, expiry_time: str | None,
           claim: str) -> None:  # fmt: skip
    """A token for SUBJECT, signed with a secret key or a private key."""
    if bool(secret_key) == bool(private_key):
        raise click.UsageError("give one of --secret-key and --private-key")
    try:
        key = keys.secret_key(secret_key) if secret_key else keys.private_key(private_key or "")
        expires = tokens.expiry_seconds(expiry_time) if expiry_time else None
        click.echo(tokens.create(key, subject, expires_in_s=expires, claim=claim))
    except (ValueError, tokens.TokenError) as exc:
        raise click.ClickException(str(exc)) from None


def _token(token: str | None, token_file: str | None) -> str:
    if bool(token) == bool(token_file):
        raise click.UsageError("give one of -i/--token and -f/--token-file")
    return token.strip() if token else keys.read_key_bytes(token_file or "").decode().strip()


@tokens_command.command("show")
@click.option("-i", "--token", help="The token.")
@click.option("-f", "--token-file", help="File holding the token.")
def show(token: str | None, token_file: str | None) -> None:
    """Header and claims of a token, without checking it."""
    try:
        click.echo(json.dumps(tokens.show(_token(token, token_file)), indent=2))
    except tokens.TokenError as exc:
        raise click.ClickException(str(exc)) from None


@tokens_command.command("validate")
@click.option("-i", "--token", help="The token.")
@click.option("-f", "--token-file", help="File holding the token.")
@click.option("--secret-key", help="Secret key (HS256 tokens).")
@click.option("--public-key", help="Public key (RS256/ES256 tokens).")
@click.option("--claim", default="sub", show_default=True, help="Claim naming the role.")
def validate(token: str | None, token_file: str | None, secret_key: str | None, public_key: str | None,
             claim: str) -> None:  # fmt: skip
    """Check a token's signature and expiry as a broker would; prints its claims, or fails saying why."""
    if bool(secret_key) == bool(public_key):
        raise click.UsageError("give one of --secret-key and --public-key")
    try:
        key = keys.secret_key(secret_key) if secret_key else keys.public_key(public_key or "")
        checked = tokens.check(_token(token, token_file), key, claim=claim)
    except (ValueError, tokens.TokenError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(checked.claims, indent=2))
