import pytest

from bench.platform.units import format_size, parse_size, parse_sizes


@pytest.mark.parametrize("text,value", [("4096", 4096), ("4K", 4096), ("4KiB", 4096), ("16 MiB", 16 << 20),
                                        ("1g", 1 << 30), ("1GB", 1 << 30), ("3B", 3)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text,message", [("0", "not a positive size"), ("-4K", "not a positive size"),
                                          ("abc", "not a size"), ("1.5G", "not a size"), ("", "not a size")])
def test_parse_size_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        parse_size(text)


def test_parse_sizes_lists_and_ranges():
    assert parse_sizes("1M,4K,4K") == (4096, 1 << 20)
    assert parse_sizes("4K:64K") == (4096, 8192, 16384, 32768, 65536)
    assert parse_sizes("3K:8K") == (4096, 8192)  # a range starts at the first power of two inside it
    with pytest.raises(ValueError, match="start is above"):
        parse_sizes("1M:4K")
    with pytest.raises(ValueError):
        parse_sizes("4K,,1M")


def test_format_size():
    assert [format_size(n) for n in (512, 4096, 1536, 16 << 20, 1 << 30)] == [
        "512 B", "4 KiB", "1.5 KiB", "16 MiB", "1 GiB"]
