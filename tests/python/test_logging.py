# SPDX-License-Identifier: MIT
"""The daemon's log (server/src/base/log.c): one line "HH:MM:SS.mmm sensimd LEVEL message" per
event on stderr, --log-level drops every message above the chosen level, and text from clients
shows its invisible and bidirectional code points escaped (base/text.c)."""

from __future__ import annotations

import datetime
import re
import struct

import pytest

from sensim import errors, pb

LEVELS = ["error", "warn", "info", "debug"]

# log.c pads the level to five characters ("%-5s ")
LINE = re.compile(r"(\d\d):(\d\d):(\d\d)\.(\d{3}) sensimd (error|warn|info|debug) +(\S.*)")


def log_lines(daemon) -> list[str]:
    """The daemon's stderr lines, without the frame Daemon.stderr() puts around them."""
    lines = daemon.stderr().splitlines()
    if lines and lines[0].startswith("--- ") and lines[0].endswith(" stderr ---"):
        lines = lines[1:]
    if lines and lines[-1] == "--- end ---":
        lines = lines[:-1]
    return lines


def parse(lines: list[str]) -> list[tuple[str, str]]:
    """(level, message) of every line; each line must have the documented form."""
    out = []
    now = datetime.datetime.now(datetime.timezone.utc)
    now_s = now.hour * 3600 + now.minute * 60 + now.second
    for line in lines:
        m = LINE.fullmatch(line)
        assert m, f"log line not of the form 'HH:MM:SS.mmm sensimd LEVEL message': {line!r}"
        hh, mm, ss = int(m[1]), int(m[2]), int(m[3])
        assert hh < 24 and mm < 60 and ss < 61, line
        # the time of day is UTC and recent (modulo midnight; tight enough to notice minutes and
        # seconds in each other's place)
        age = (now_s - (hh * 3600 + mm * 60 + ss)) % 86400
        assert age < 30 or age > 86400 - 2, (line, now.isoformat())
        out.append((m[5], m[6]))
    return out


def run_session(daemon) -> None:
    """One client connects and pings; a second sends a length prefix over max_frame_bytes
    (logged at warn) and is refused and closed; then the daemon stops."""
    with daemon.client(client_name="logged") as good:
        good.ping(b"hi")
        bad = daemon.client(client_name="oversize")
        bad.send_raw(struct.pack("<I", 0xFFFFFFFF))
        env = bad.recv(timeout=10)
        assert env.status.code == pb.RESOURCE_EXHAUSTED, env
        with pytest.raises(errors.ConnectionClosed):
            bad.recv(timeout=10)
        bad.close()
        good.ping(b"still")
    assert daemon.stop() == 0


def messages(entries, level: str) -> list[str]:
    return [msg for lvl, msg in entries if lvl == level]


def oversize_warning(entries) -> list[str]:
    return [msg for msg in messages(entries, "warn")
            if re.fullmatch(r"session \d+ \(127\.0\.0\.1:\d+\): frame length 4294967295 exceeds "
                            r"max_frame_bytes \d+; closing", msg)]


def startup_line(entries) -> list[str]:
    return [msg for msg in messages(entries, "info")
            if re.fullmatch(r"sensimd \S+: \d+ threads, max frame \d+ bytes, max \d+ clients",
                            msg)]


def connected_lines(entries) -> list[str]:
    return [msg for msg in messages(entries, "debug")
            if re.fullmatch(r"session \d+: connected from 127\.0\.0\.1:\d+", msg)]


@pytest.mark.parametrize("level", LEVELS)
def test_log_lines_have_the_documented_form_and_respect_the_level(sensimd_factory, level):
    d = sensimd_factory("--log-level", level)
    run_session(d)
    entries = parse(log_lines(d))
    shown = LEVELS[:LEVELS.index(level) + 1]
    hidden = LEVELS[len(shown):]

    # nothing above the level
    for lvl in hidden:
        assert not messages(entries, lvl), (level, lvl, messages(entries, lvl))

    # what this session logs at each level that is shown
    if "warn" in shown:
        assert len(oversize_warning(entries)) == 1, entries
    if "info" in shown:
        assert len(startup_line(entries)) == 1, entries
        assert "stopped cleanly" in messages(entries, "info"), entries
        assert any("joined environment 'default'" in m for m in messages(entries, "info"))
    if "debug" in shown:
        assert len(connected_lines(entries)) == 2, entries
    if level == "error":
        assert entries == [], entries      # a clean run has no errors


# Code points that must never reach the log as themselves (U+2028 and U+2029 end a line for
# many viewers and for str.splitlines; the bidirectional controls reorder what a terminal
# shows; the others are invisible), each with the escape the log shows instead.
HIDDEN = ["\u202e", "\u202d", "\u202a", "\u202b", "\u202c", "\u2028", "\u2029", "\u200e",
          "\u200f", "\u2066", "\u2067", "\u2068", "\u2069", "\u061c", "\u200b", "\u2060",
          "\ufeff", "\u00ad", "\U000e0041"]


def escaped(text: str) -> str:
    """text as the log must show it: each HIDDEN code point as \\uXXXX or \\UXXXXXXXX."""
    return "".join((f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
                   if ch in HIDDEN else ch for ch in text)


def test_client_text_reaches_the_log_with_bidirectional_and_invisible_code_points_escaped(
        sensimd_factory):
    d = sensimd_factory("--log-level", "debug", "--max-environments", "1")
    # (the daemon keeps 63 bytes of a client name, and takes environment names up to 63 bytes)
    name = "evil" + "".join(HIDDEN[:14]) + "name"
    env = "env\u202eexe.txt\u2028\u2066\u200f\ufeff"
    other = "other" + "".join(HIDDEN[14:]) + "\u2029\u202e"
    # in the log: the client name and the environment name (joined), the environment name
    # (released), and the message of a refused request naming the environment it wanted
    with d.client(client_name=name, environment=env, retention="keep") as c:
        c.remove("environment")
        with pytest.raises(errors.ResourceExhausted, match="max_environments"):
            d.client(client_name=name, environment=other)
    assert d.stop() == 0

    raw = d.log_path.read_bytes()
    text = raw.decode("utf-8")  # still valid UTF-8
    for ch in HIDDEN + ["\x85"]:
        assert ch not in text, (hex(ord(ch)), text)
    # every line keeps the documented form (nothing split a line or hid its start)
    entries = parse(log_lines(d))
    joined = [m for lvl, m in entries if lvl == "info" and "joined environment" in m]
    assert len(joined) == 1, entries
    assert f"'{escaped(name)}', controller) joined environment '{escaped(env)}' (created)" \
        in joined[0], joined
    assert any(m == f"environment '{escaped(env)}': no longer kept; destroyed when its last "
               "client leaves" for lvl, m in entries if lvl == "info"), entries
    assert any(f"hello.environment '{escaped(other)}' cannot be created" in m
               for lvl, m in entries if lvl == "debug"), entries
