"""Record batch compression codecs (attribute bits 0-2 of a RecordBatch v2).

All codecs go through ``cramjam``. Kafka's wire formats per codec:

- gzip (1): a gzip stream (RFC 1952).
- snappy (2): the Java client writes xerial ``SnappyOutputStream`` framing:
  ``\\x82SNAPPY\\x00``, int32 version, int32 compatible version, then blocks of
  [int32 big-endian length][raw snappy block]. librdkafka and kafka-python
  read it; librdkafka may also send plain raw snappy. Both are accepted.
- lz4 (3): the LZ4 *frame* format (magic ``04 22 4d 18``). Java's decoder
  decompresses every block on its own, so we write independent blocks.
- zstd (4): a zstd frame (Java's streaming encoder omits the content size;
  ``cramjam.zstd.decompress`` handles that).
"""

from __future__ import annotations

import struct

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}
CODECS_BY_NAME: dict[str, int] = {name: codec for codec, name in CODEC_NAMES.items()}

# Default levels: Kafka's defaults for gzip (Deflater default, 6) and zstd (3).
# lz4 uses the fast compressor (cramjam's default) unless a level is given.
DEFAULT_LEVELS: dict[int, int | None] = {GZIP: 6, LZ4: None, ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
XERIAL_HEADER_SIZE = _XERIAL_HEADER.size  # 16
XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream's default block size
_INT32 = struct.Struct(">i")
# Stream identifier of the (different) official snappy framing format.
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"


def codec_name(codec: int) -> str:
    """Kafka's name for a codec id ("none", "gzip", ...); ValueError if unknown."""
    _check_codec(codec)
    return CODEC_NAMES[codec]


def _check_codec(codec: int) -> None:
    if codec not in CODEC_NAMES:
        raise ValueError(
            f"unknown compression codec {codec!r} (expected 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"
        )


def compress(codec: int, data: bytes, *, level: int | None = None) -> bytes:
    """Compress ``data`` the way a Kafka client does for ``codec``.

    ``level`` overrides the codec's default level (ignored by none and snappy).
    """
    _check_codec(codec)
    if codec == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.compress(data, level=level))
        if codec == SNAPPY:
            return _xerial_compress(data)
        if codec == LZ4:
            compressor = cramjam.lz4.Compressor(
                level=level, content_checksum=False, block_linked=False
            )
            compressor.compress(data if type(data) is bytes else bytes(data))
            return bytes(compressor.finish())
        return bytes(cramjam.zstd.compress(data, level=level))
    except cramjam.CompressionError as e:
        raise ValueError(f"{CODEC_NAMES[codec]} compression failed: {e}") from e


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress a batch's records section; ValueError on an unknown codec or bad data."""
    _check_codec(codec)
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise ValueError(f"invalid {CODEC_NAMES[codec]} data: {e}") from e


def _xerial_compress(data: bytes) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION))
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        return _xerial_decompress(view)
    if view[: len(_SNAPPY_FRAMED_MAGIC)] == _SNAPPY_FRAMED_MAGIC:
        return bytes(cramjam.snappy.decompress(view))
    return bytes(cramjam.snappy.decompress_raw(view))


def _xerial_decompress(view: memoryview) -> bytes:
    total = len(view)
    if total < XERIAL_HEADER_SIZE:
        raise ValueError(
            f"invalid snappy data: xerial header needs {XERIAL_HEADER_SIZE} bytes, got {total}"
        )
    out = bytearray()
    pos = XERIAL_HEADER_SIZE
    while pos < total:
        if total - pos < 4:
            raise ValueError(f"invalid snappy data: truncated xerial block length at byte {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > total:
            raise ValueError(
                f"invalid snappy data: xerial block at byte {pos - 4} declares {length} bytes, "
                f"{total - pos} remain"
            )
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)
