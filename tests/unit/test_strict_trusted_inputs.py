"""Trusted inputs (study config, generation config, study lock) are decoded as strictly as the
verifier's untrusted ones: a duplicate key, a NaN literal or an unknown field is refused, never
silently resolved."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from harness.canonical import check_strict_json, decode_strict
from harness.errors import GenerationConfigError, InputError, StudyLockError, V2ConfigError
from harness.lock import build_lock, decode_lock, encode_lock
from harness.providers import decode_generation_config, default_generation_config
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, decode_config


def _duplicate_first_key(data: bytes, key: str) -> bytes:
    # `{"key": X, ...}` -> `{"key": X, "key": X, ...}`: the same block twice, so a decoder that
    # keeps the last one would load the same values and pass unnoticed.
    document = json.loads(data)
    block = json.dumps(document[key])
    text = data.decode()
    return ("{" + f'"{key}": {block}, ' + text.lstrip()[1:]).encode()


def test_duplicated_analysis_block_in_the_study_config_is_refused() -> None:
    data = data_path(DEFAULT_CONFIG_PATH).read_bytes()
    decode_config(data, origin="x")  # the committed config is strict
    with pytest.raises(V2ConfigError, match=r"not strict JSON: duplicate key 'analysis'"):
        decode_config(_duplicate_first_key(data, "analysis"), origin="x")


def test_unknown_field_in_the_study_config_is_refused() -> None:
    document = json.loads(data_path(DEFAULT_CONFIG_PATH).read_bytes())
    document["surprise"] = 1
    with pytest.raises(V2ConfigError, match="surprise"):
        decode_config(json.dumps(document).encode(), origin="x")


def test_generation_config_duplicate_and_nan_are_refused() -> None:
    import msgspec

    data = msgspec.json.encode(default_generation_config())
    decode_generation_config(data, origin="g")
    key = next(iter(json.loads(data)))
    with pytest.raises(GenerationConfigError, match=f"duplicate key '{key}'"):
        decode_generation_config(_duplicate_first_key(data, key), origin="g")
    with pytest.raises(GenerationConfigError, match="NaN"):
        decode_generation_config(data.replace(b"0.2", b"NaN", 1), origin="g")


def test_study_lock_duplicate_key_is_refused() -> None:
    data = encode_lock(build_lock())
    decode_lock(data, origin="l")
    with pytest.raises(StudyLockError, match=r"not strict JSON: duplicate key 'schema'"):
        decode_lock(_duplicate_first_key(data, "schema"), origin="l")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
        (b"[NaN]", "non-standard JSON constant NaN"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'"\xff"', "codec can't decode"),
        (b"{", "Expecting property name"),
    ],
)
def test_check_strict_json_names_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_strict_json(data)


def _v2(data: bytes) -> object:
    return decode_config(data, origin="f")


def _generation(data: bytes) -> object:
    return decode_generation_config(data, origin="f")


def _lock(data: bytes) -> object:
    return decode_lock(data, origin="f")


@pytest.mark.parametrize(
    ("decode", "error", "what"),
    [
        (_v2, V2ConfigError, "V2 study config f"),
        (_generation, GenerationConfigError, "generation config f"),
        (_lock, StudyLockError, "study lock f"),
    ],
)
@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b'{"a": 1, "a": 1}', "is not strict JSON: duplicate key 'a'"),
        (b"[NaN]", "is not strict JSON: non-standard JSON constant NaN"),
        (b"[1]", "is malformed: Expected `object`, got `array`"),
        (b"{}", "is malformed: Object missing required field"),
    ],
)
def test_every_trusted_decoder_words_its_refusals_alike(
    decode: Any, error: type[Exception], what: str, data: bytes, says: str
) -> None:
    # One decoder (canonical.decode_strict) behind all three files: the same refusal, worded
    # the same way, under each file's own error class and name.
    with pytest.raises(error, match="^" + re.escape(f"{what} {says}")):
        decode(data)


class _Pair(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    a: int
    b: str


def test_decode_strict_decodes_and_refuses_in_its_three_words() -> None:
    assert decode_strict(b'{"a": 1, "b": "x"}', _Pair, InputError, "p") == _Pair(a=1, b="x")
    with pytest.raises(InputError, match=r"^p is not strict JSON: "):
        decode_strict(b'{"a": 1, "b": "x"', _Pair, InputError, "p")
    wrong_type = r"^p is malformed: Expected `int`, got `str` - at `\$\.a`"
    with pytest.raises(InputError, match=wrong_type):
        decode_strict(b'{"a": "1", "b": "x"}', _Pair, InputError, "p")
    with pytest.raises(InputError, match=r"^p is malformed: Object contains unknown field `c`"):
        decode_strict(b'{"a": 1, "b": "x", "c": 0}', _Pair, InputError, "p")
