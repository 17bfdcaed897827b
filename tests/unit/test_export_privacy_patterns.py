"""The privacy scans: credential shapes and local identifiers found, ordinary data left alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.privacy import credential_findings, local_findings

CREDENTIALS = [
    (b"AIza" + b"A1_-" * 8 + b"xyz", "Google API key"),
    (b"ya29.a0AfH6SMBx0123456789abcdef", "Google OAuth token"),
    (b"-----BEGIN PRIVATE KEY-----", "private key block"),
    (b"AKIAABCDEFGHIJKLMNOP", "AWS access key id"),
    (b"ghp_" + b"a" * 36, "GitHub token"),
    (b"sk-proj-" + b"b" * 30, "OpenAI-style secret key"),
    (b"xoxb-1234567890-abc", "Slack token"),
    (b"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "bearer token"),
    (b"x-goog-api-key: abcdefgh12345678", "API key header"),
    (b"password = hunter2hunter2hunter2", "secret assignment"),
]


@pytest.mark.parametrize(("data", "kind"), CREDENTIALS, ids=[k for _, k in CREDENTIALS])
def test_export_credential_shapes_are_found(data: bytes, kind: str) -> None:
    found = credential_findings("f", b"prefix " + data + b" suffix")
    assert kind in {f.kind for f in found}
    assert all(f.offset >= 7 for f in found)
    assert data.decode() not in " ".join(f.line() for f in found)


@pytest.mark.parametrize(
    "data",
    [
        b'{"digest": "blake3:' + b"0f" * 32 + b'"}',
        b'{"api_key": "[REDACTED]"}',
        b'{"prompt_tokens": 12345, "thought_tokens": 0, "tokens": 99999999999}',
        b'{"credential_source": "file", "note": "no secret here"}',
        b"sk-short",
    ],
)
def test_export_ordinary_data_is_not_a_credential(data: bytes) -> None:
    assert credential_findings("f", data) == []


@given(st.lists(st.sampled_from("0123456789abcdef"), min_size=64, max_size=64))
def test_export_digests_never_look_like_credentials(hexdigits: list[str]) -> None:
    data = b'"blake3:' + "".join(hexdigits).encode() + b'"'
    assert credential_findings("f", data) == []


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'"path": "/home/alice/project/x.json"', "local absolute path"),
        (b'"/root/.cache/x"', "local absolute path"),
        (b"at /tmp/pytest-of-root/x", "local absolute path"),
        (b'"/Users/bob/study"', "local absolute path"),
        (b"C:\\Users\\carol", "Windows drive path"),
        (b"file:///etc/passwd", "file URL"),
        (b"written on Alice-Laptop today", "local user or host name"),
    ],
)
def test_export_local_identifiers_are_found(data: bytes, kind: str) -> None:
    found = local_findings("f", data, names=["alice-laptop", "root", "ab"])
    assert kind in {f.kind for f in found}


@pytest.mark.parametrize(
    "data",
    [
        b'{"path": "harness/prompts/critic.v1.txt"}',
        b'{"base_url": "https://generativelanguage.googleapis.com/home/v1"}',
        b"the schema root is an object",
        b'{"alicent": 1, "malice": 2}',
        b"ratio 1/2 and w10/lookup",
    ],
)
def test_export_ordinary_text_is_not_local(data: bytes) -> None:
    assert local_findings("f", data, names=["alice", "root"]) == []
