"""Which config keys hold secrets, and a config safe to log.

Apart from :mod:`reliable_kafka.settings` so that the Kafka clients mask secrets without
importing pydantic: the Structured Streaming source's Python workers import the clients, and each
of them (a query's driver-side reader, every fresh executor worker) would otherwise pay for
pydantic's import before its first call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Which config keys hold secrets (see is_secret_key). Masking a key that turns out harmless costs
# a less useful log line; missing a secret leaks it, so the rule errs on the side of masking.
_SECRET_WORD_PARTS = (
    "password",
    "passwd",
    "secret",
    "credential",
    "token",
    "auth",  # also oauthbearer (sasl.oauthbearer.config...)
    "jaas",
    "pem",  # inline keys and certificates: ssl.key.pem, ssl.certificate.pem
    "private",
    "username",  # sasl.username: half of a credential
)
_SECRET_WORD_PREFIXES = ("key",)  # ssl.key.*, ssl.keystore.*, sasl.kerberos.keytab
_KEY_WORDS = re.compile(r"[._\-]+")


def is_secret_key(key: str) -> bool:
    """Whether the value of config key ``key`` must never be logged or shown.

    The rule: split the lower-cased key into words at ``.``, ``_`` and ``-``; the key is secret
    when a word contains ``password``, ``passwd``, ``secret``, ``credential``, ``token``, ``auth``
    (so ``oauthbearer`` too), ``jaas``, ``pem``, ``private`` or ``username``, or a word starts with
    ``key`` (``ssl.key.password``, ``ssl.key.pem``, ``ssl.keystore.password``, ``sasl.kerberos.keytab``
    via ``keytab``...). So ``sasl.password``, ``sasl.jaas.config``, ``sasl.oauthbearer.config``,
    ``sasl.oauthbearer.client.secret``, ``ssl.key.pem`` and ``sasl.username`` are masked, and
    ``bootstrap.servers`` or ``client.id`` are not.
    """
    words = [word for word in _KEY_WORDS.split(key.lower()) if word]
    return any(
        any(part in word for part in _SECRET_WORD_PARTS) or word.startswith(_SECRET_WORD_PREFIXES)
        for word in words
    )


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` safe to log: the values of secret keys (:func:`is_secret_key`) become ``***``."""
    return {key: "***" if is_secret_key(str(key)) else value for key, value in config.items()}
