"""``--config`` / ``--command-config`` files are read as Java's ``Properties.load(InputStream)``
reads them (what Kafka's ``Utils.loadProps`` calls): checked against Java itself.

The same bytes go through ``read_properties_file`` and through a small Java program calling
``Properties.load`` on a ``FileInputStream``; every key and value must be equal (values compared
after ``trim()``, as Kafka's ConfigDef parses them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kafka_sidecar.server.config import load_config, parse_properties, read_properties_file
from kafka_sidecar.storage.log_config import ConfigError

# Every rule of Properties.load the file format has, one or more lines each.
SAMPLE = (
    b"# a comment\n"
    b"   ! another comment, indented\n"
    b"num.partitions 3\n"                      # whitespace separator
    b"log.segment.bytes:1048576\n"             # colon
    b"log.retention.hours = 5\n"               # = with spaces
    b"\tlog.cleaner.threads\t\t2\n"            # tabs
    b"a.key.with.no.value\n"
    b"empty.value=\n"
    b"key\\ with\\ spaces = v\n"               # escaped whitespace in a key
    b"key\\=eq=v2\n"                           # escaped = in a key
    b"double==value\n"                         # the second = belongs to the value
    b"spaced = = value\n"
    b"latin1=caf\xe9\n"                        # ISO-8859-1 byte
    b"escaped=caf\\u00e9 \\u20ac\n"            # \uXXXX
    b"tabs=a\\tb\\nc\\qd\n"                    # \t, \n, unknown escape drops the backslash
    b"continued=one, \\\n"
    b"     two, \\\n"
    b"\t   three\n"
    b"# a comment ending in a backslash does not continue \\\n"
    b"after.comment=yes\n"
    b"even.backslashes=x\\\\\n"                # two backslashes: not a continuation
    b"next=line\n"
    b"crlf=1\r\n"
    b"cr.only=2\rafter.cr=3\n"
    b"trailing = padded   \n"
    b"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
    b"  user_admin=\"admin-secret\";\n"
    b"last.line.continued=end\\"
)

JAVA = r"""
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeMap;

public class LoadProps {
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { p.load(in); }
        StringBuilder out = new StringBuilder("{");
        for (var e : new TreeMap<Object, Object>(p).entrySet()) {
            if (out.length() > 1) out.append(',');
            out.append(q((String) e.getKey())).append(':').append(q(((String) e.getValue()).trim()));
        }
        System.out.println(out.append('}'));
    }
}
"""


def test_parses_as_java_properties_load(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes(SAMPLE)
    ours = read_properties_file(f)
    assert ours["num.partitions"] == "3" and ours["log.segment.bytes"] == "1048576"
    assert ours["latin1"] == "caf\u00e9" and ours["escaped"] == "caf\u00e9 \u20ac"
    assert ours["continued"] == "one, two, three" and ours["after.comment"] == "yes"
    assert ours["key with spaces"] == "v" and ours["key=eq"] == "v2" and ours["double"] == "=value"
    assert "# a comment ending in a backslash does not continue \\" not in ours
    if shutil.which("java") is None:
        pytest.skip("no Java here to compare with Properties.load")
    src = tmp_path / "LoadProps.java"
    src.write_text(JAVA)
    done = subprocess.run(["java", str(src), str(f)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    java = json.loads(done.stdout)
    assert ours == java


def test_malformed_unicode_escape_is_one_error_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.properties"
    f.write_bytes(b"x=\\u12G4\n")
    with pytest.raises(ConfigError, match=r"cannot read config file .*bad.properties: Malformed \\uxxxx encoding"):
        load_config(f, [])


def test_whitespace_separated_config_applies(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_text("num.partitions 3\nlog.retention.hours: 5\n")
    config = load_config(f, [], environ={})
    assert config.get("num.partitions") == 3 and config.sources["num.partitions"] == str(f)
    assert config.unknown == []


def test_unknown_override_near_miss_is_an_error_with_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"^unknown config num\.partition in --override; did you mean num\.partitions\?$"):
        load_config(None, ["num.partition=3"], environ={})
    # No known name close to it: warned about and ignored, as Kafka does (plugins' own configs).
    assert load_config(None, ["no.such.setting=1"], environ={}).unknown == ["no.such.setting"]


def test_parse_properties_keeps_the_old_forms() -> None:
    assert parse_properties("a=1\nb: 2\n c = 3 \n#d=4\n") == {"a": "1", "b": "2", "c": "3"}
