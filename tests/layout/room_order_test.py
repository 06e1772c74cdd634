#!/usr/bin/env python3
"""The layout contract of DESIGN.md: model/ is a set of rooms whose
dependencies point one way, and the folders around it respect the same order.

  common, kernels  <  model/<room>, lowest room first  <  server, convert, bench, client

An #include of a header in a higher room (or folder) is an error, as is a file
at the top of model/ other than CMakeLists.txt and README.md. The room order
comes from model/CMakeLists.txt (DOCSPARSE_MODEL_ROOMS), passed by CTest.

  room_order_test.py --repo ROOT --rooms "text;checkpoint;..."

Runs the check on the real tree, and on small synthetic trees, to show it
catches what it claims to catch.
"""
import argparse
import pathlib
import re
import sys
import tempfile
import unittest

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# Folders above model/ (they may include any room) and below it (none).
BELOW_MODEL = ("common", "kernels")
ABOVE_MODEL = ("server", "convert", "bench", "client")
ALLOWED_AT_MODEL_TOP = {"CMakeLists.txt", "README.md"}


def layer_of(path, rooms):
    """Rank of a repo-relative path ('model/encoder/x.h'), or None when the
    path is outside the layered folders (proto output, tests, third party)."""
    parts = pathlib.PurePosixPath(path).parts
    if not parts:
        return None
    if parts[0] in BELOW_MODEL:
        return BELOW_MODEL.index(parts[0])
    if parts[0] == "model":
        if len(parts) >= 3 and parts[1] in rooms:
            return len(BELOW_MODEL) + rooms.index(parts[1])
        return None  # reported separately as a file outside any room
    if parts[0] in ABOVE_MODEL:
        return len(BELOW_MODEL) + len(rooms)
    return None


def layout_errors(repo, rooms):
    """Every violation of the layout contract under repo, as readable lines."""
    repo = pathlib.Path(repo)
    errors = []
    model = repo / "model"
    for entry in sorted(model.iterdir()):
        if entry.is_dir():
            if entry.name not in rooms:
                errors.append(f"model/{entry.name}/ is not a room (rooms: {', '.join(rooms)})")
        elif entry.name not in ALLOWED_AT_MODEL_TOP:
            errors.append(f"model/{entry.name}: files live in a room, not at the top of model/")
    for room in rooms:
        if not (model / room).is_dir():
            errors.append(f"model/{room}/ is missing")

    for top in BELOW_MODEL + ("model",) + ABOVE_MODEL:
        folder = repo / top
        if not folder.is_dir():
            continue
        for source in sorted(folder.rglob("*")):
            if source.suffix not in SOURCE_SUFFIXES or not source.is_file():
                continue
            rel = source.relative_to(repo).as_posix()
            own = layer_of(rel, rooms)
            if own is None:
                continue
            text = source.read_text(encoding="utf-8", errors="replace")
            for included in INCLUDE.findall(text):
                if included.startswith("model/") and layer_of(included, rooms) is None:
                    errors.append(f"{rel}: includes {included}, which is in no room")
                    continue
                target = layer_of(included, rooms)
                if target is not None and target > own:
                    errors.append(f"{rel}: includes {included}, which lies above it")
    return errors


class RealTreeTest(unittest.TestCase):
    def test_no_include_points_up(self):
        errors = layout_errors(ARGS.repo, ARGS.rooms)
        self.assertEqual(errors, [], "\n" + "\n".join(errors))


class CheckCatchesViolationsTest(unittest.TestCase):
    ROOMS = ["text", "checkpoint", "attention"]

    def tree(self, files):
        root = pathlib.Path(self.enterContext(tempfile.TemporaryDirectory()))
        (root / "model").mkdir()
        for room in self.ROOMS:
            (root / "model" / room).mkdir()
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        return root

    def test_downward_and_sideways_includes_pass(self):
        root = self.tree({
            "model/attention/a.h": '#include "model/text/t.h"\n#include "model/attention/b.h"\n',
            "server/s.cc": '#include "model/attention/a.h"\n#include "kernels/k.h"\n',
            "kernels/k.cc": '#include "common/c.h"\n',
        })
        self.assertEqual(layout_errors(root, self.ROOMS), [])

    def test_upward_include_between_rooms_fails(self):
        root = self.tree({"model/text/t.cc": '#include "model/attention/a.h"\n'})
        errors = layout_errors(root, self.ROOMS)
        self.assertEqual(len(errors), 1)
        self.assertIn("model/text/t.cc: includes model/attention/a.h", errors[0])

    def test_model_including_server_and_kernels_including_model_fail(self):
        root = self.tree({
            "model/checkpoint/c.cc": '#include "server/metrics.h"\n',
            "kernels/k.cc": '#  include "model/text/t.h"\n',
        })
        self.assertEqual(len(layout_errors(root, self.ROOMS)), 2)

    def test_file_at_model_top_and_roomless_include_fail(self):
        root = self.tree({
            "model/encoder.h": "",
            "server/s.cc": '#include "model/encoder.h"\n',
        })
        errors = layout_errors(root, self.ROOMS)
        self.assertTrue(any("top of model/" in e for e in errors), errors)
        self.assertTrue(any("in no room" in e for e in errors), errors)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--rooms", required=True, help="CMake list: text;checkpoint;...")
    ARGS, rest = parser.parse_known_args()
    ARGS.rooms = [room for room in ARGS.rooms.split(";") if room]
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
