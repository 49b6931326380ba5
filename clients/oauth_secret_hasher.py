"""How an OAuth2 client's secret is stored: salted SHA-512, like API keys (decision 104).

Django's default password hasher (PBKDF2, a million rounds) made every `POST /oauth/token` cost
about 300 ms of CPU: stretching protects guessable passwords, and a client secret is 128 random
characters (over 700 bits), which no number of rounds makes harder to find. The toolkit hashes
with OAUTH2_PROVIDER["CLIENT_SECRET_HASHER"] and checks with Django's check_password, so the
hasher is listed last in PASSWORD_HASHERS: never chosen for a user's password, only used to
verify the hashes it made. The comparison is constant-time.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.hashers import BasePasswordHasher, mask_hash
from django.utils.crypto import constant_time_compare


class ClientSecretHasher(BasePasswordHasher):
    algorithm = "oauth_client_sha512"

    def encode(self, password: str, salt: str) -> str:
        self._check_encode_args(password, salt)
        digest = hashlib.sha512(f"{salt}${password}".encode()).hexdigest()
        return f"{self.algorithm}${salt}${digest}"

    def decode(self, encoded: str) -> dict[str, Any]:
        algorithm, salt, digest = encoded.split("$", 2)
        assert algorithm == self.algorithm
        return {"algorithm": algorithm, "hash": digest, "salt": salt}

    def verify(self, password: str, encoded: str) -> bool:
        decoded = self.decode(encoded)
        return constant_time_compare(encoded, self.encode(password, decoded["salt"]))

    def safe_summary(self, encoded: str) -> dict[str, str]:
        decoded = self.decode(encoded)
        return {"algorithm": decoded["algorithm"], "salt": mask_hash(decoded["salt"], show=2),
                "hash": mask_hash(decoded["hash"])}

    def harden_runtime(self, password: str, encoded: str) -> None:
        pass  # one fixed cost: there are no rounds to even out
