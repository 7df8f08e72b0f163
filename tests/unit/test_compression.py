"""Compression codecs: round trips, Kafka's framings, errors."""

from __future__ import annotations

import os
import struct

import cramjam
import pytest
from kafka_sidecar.protocol import compression
from kafka_sidecar.protocol.compression import (
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress,
)

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

PAYLOADS = {
    "empty": b"",
    "small": b"hello kafka",
    "repetitive-200k": b"abcdefgh" * 25_000,
    "random-100k": os.urandom(100_000),
    "mixed-300k": os.urandom(70_000) + b"\x00" * 150_000 + os.urandom(80_000),
}


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_round_trip(codec, name):
    data = PAYLOADS[name]
    packed = compress(codec, data)
    assert type(packed) is bytes
    out = decompress(codec, packed)
    assert type(out) is bytes
    assert out == data


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: CODEC_NAMES[c])
def test_accepts_bytearray_and_memoryview(codec):
    data = b"xyz" * 1000
    for wrapped in (bytearray(data), memoryview(data)):
        assert decompress(codec, compress(codec, wrapped)) == data
        assert decompress(codec, memoryview(compress(codec, data))) == data


def test_compression_shrinks_repetitive_data():
    data = PAYLOADS["repetitive-200k"]
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        assert len(compress(codec, data)) < len(data) // 10, CODEC_NAMES[codec]


def test_none_is_identity():
    assert compress(NONE, b"abc") == b"abc"
    assert decompress(NONE, b"abc") == b"abc"


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=lambda c: CODEC_NAMES[c])
def test_levels(codec):
    data = PAYLOADS["mixed-300k"]
    for level in (1, 9):
        assert decompress(codec, compress(codec, data, level=level)) == data


def test_gzip_is_a_gzip_stream():
    assert compress(GZIP, b"x")[:2] == b"\x1f\x8b"


# ---------------------------------------------------------------- snappy / xerial


def _xerial_blocks(packed: bytes) -> list[bytes]:
    magic, version, compat = struct.unpack_from(">8sii", packed)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(packed[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(packed)
    return blocks


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = PAYLOADS["mixed-300k"]
    packed = compress(SNAPPY, data)
    assert packed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    blocks = _xerial_blocks(packed)
    assert len(blocks) == -(-len(data) // XERIAL_BLOCK_SIZE)
    # every block is plain raw snappy of one 32 KiB slice
    out = b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)
    assert out == data


def test_snappy_empty_input_is_header_only():
    assert compress(SNAPPY, b"") == XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
    assert decompress(SNAPPY, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01") == b""


def test_snappy_accepts_raw_snappy():
    data = PAYLOADS["mixed-300k"]
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(b""))) == b""


def test_snappy_accepts_hand_built_xerial_with_uneven_blocks():
    parts = [b"a" * 10, os.urandom(5000), b"b" * 70_000, b""]
    packed = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for p in parts:
        block = bytes(cramjam.snappy.compress_raw(p))
        packed += struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, packed) == b"".join(parts)


def test_snappy_accepts_framing_format_stream():
    data = b"framed" * 5000
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress(data))) == data


@pytest.mark.parametrize(
    "packed",
    [
        XERIAL_MAGIC + b"\x00\x00",  # header cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",  # block length cut short
        XERIAL_MAGIC
        + struct.pack(">ii", 1, 1)
        + struct.pack(">i", 100)
        + b"abc",  # block cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", -1),  # negative length
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 4) + b"\xff\xff\xff\xff",
        b"\xff\xff\xff\xff\xff",  # not raw snappy either
    ],
)
def test_snappy_bad_data(packed):
    with pytest.raises(ValueError, match="snappy"):
        decompress(SNAPPY, packed)


# ------------------------------------------------------------------------- lz4


def test_lz4_writes_frames_with_independent_blocks():
    data = PAYLOADS["mixed-300k"]  # > 64 KiB: several blocks
    packed = compress(LZ4, data)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg >> 6 == 0b01  # frame version 1
    assert flg & 0x20  # block independence: Java decodes each block on its own
    assert not flg & 0x01  # no dictionary id
    assert decompress(LZ4, packed) == data


def test_lz4_accepts_linked_blocks_and_content_checksum():
    data = PAYLOADS["mixed-300k"]
    assert decompress(LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_lz4_rejects_raw_block():
    with pytest.raises(ValueError, match="lz4"):
        decompress(LZ4, bytes(cramjam.lz4.compress_block(b"abc" * 100)))


# ------------------------------------------------------------------------ zstd


def test_zstd_frame_without_content_size():
    # Java's ZstdOutputStream writes frames without the content size field:
    # magic, FHD 0x00 (no size, not single-segment), window descriptor, one raw last block.
    payload = b"no content size here"
    block_header = (1 | (0 << 1) | (len(payload) << 3)).to_bytes(3, "little")
    frame = b"\x28\xb5\x2f\xfd" + b"\x00" + b"\x00" + block_header + payload
    assert decompress(ZSTD, frame) == payload


def test_zstd_concatenated_frames():
    assert decompress(ZSTD, compress(ZSTD, b"one") + compress(ZSTD, b"two")) == b"onetwo"


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 99])
def test_unknown_codec(codec):
    with pytest.raises(ValueError, match="unknown compression codec"):
        compress(codec, b"x")
    with pytest.raises(ValueError, match="unknown compression codec"):
        decompress(codec, b"x")
    with pytest.raises(ValueError, match="unknown compression codec"):
        compression.codec_name(codec)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=lambda c: CODEC_NAMES[c])
def test_garbage(codec):
    with pytest.raises(ValueError, match=CODEC_NAMES[codec]):
        decompress(codec, b"this is not compressed data at all")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=lambda c: CODEC_NAMES[c])
def test_truncated(codec):
    packed = compress(codec, os.urandom(50_000))
    with pytest.raises(ValueError):
        decompress(codec, packed[: len(packed) // 2])


def test_codec_names():
    assert [compression.codec_name(c) for c in ALL_CODECS] == [
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ]
    assert compression.CODECS_BY_NAME["zstd"] == ZSTD
