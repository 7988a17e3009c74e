"""An ID token signs someone in only when it was issued by the configured provider, for this client, and is
current: ``iss``, ``aud``, ``exp`` and ``iat`` are verified and required, not only the signature."""

import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from directory.oidc.auth import decode_id_token

ISSUER, CLIENT = "https://id.example.org/realms/lab", "gpuportal"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _token(**claims) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": CLIENT, "sub": "u-1", "iat": now, "exp": now + 300, **claims}
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, KEY, algorithm="RS256")


def _decode(token: str) -> dict:
    return decode_id_token(token, KEY.public_key(), "RS256", ISSUER, CLIENT)


def test_a_current_token_for_this_client_from_the_issuer_is_accepted():
    assert _decode(_token())["sub"] == "u-1"
    assert _decode(_token(iss=f"{ISSUER}/"))["sub"] == "u-1"  # the issuer with its trailing slash
    assert _decode(_token(aud=["other", CLIENT]))["sub"] == "u-1"


@pytest.mark.parametrize(("claims", "error"), [
    ({"aud": "another-client"}, jwt.InvalidAudienceError),
    ({"iss": "https://evil.example.org"}, jwt.InvalidIssuerError),
    ({"exp": None}, jwt.MissingRequiredClaimError),
    ({"iat": None}, jwt.MissingRequiredClaimError),
    ({"aud": None}, jwt.MissingRequiredClaimError),
    ({"exp": int(time.time()) - 3600}, jwt.ExpiredSignatureError),
    ({"iat": int(time.time()) + 3600}, jwt.ImmatureSignatureError),
])
def test_a_token_for_another_client_from_another_issuer_or_not_current_is_refused(claims, error):
    with pytest.raises(error):
        _decode(_token(**claims))


def test_a_token_signed_by_another_key_is_refused():
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode({"iss": ISSUER, "aud": CLIENT, "sub": "u-1", "iat": int(time.time()),
                         "exp": int(time.time()) + 300}, other, algorithm="RS256")
    with pytest.raises(jwt.InvalidSignatureError):
        _decode(forged)
