"""tools/check-layers keeps the layering true (docs/architecture.md, "Layers"): it passes on
the tree as it is, and fails, naming the file, the line and the fix, on a copy of the tree
with one violating include of each kind added."""
import os
import shutil
import subprocess
import tempfile
import unittest

from lib.harness import ROOT

CHECK = os.path.join(ROOT, "tools", "check-layers")
FOLDERS = ("common", "proto", "libs", "services", "tools", "bench", "fuzz")


class TestLayers(unittest.TestCase):
    def run_check(self, root):
        return subprocess.run([CHECK, "--root", root], capture_output=True, text=True, timeout=60)

    def test_tree_is_layered(self):
        p = self.run_check(ROOT)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"layers: \d+ files, \d+ includes, ok")

    def copy_tree(self):
        d = tempfile.mkdtemp(prefix="ipl-layers-")
        self.addCleanup(shutil.rmtree, d, True)
        shutil.copy(os.path.join(ROOT, "Makefile"), d)
        for f in FOLDERS:
            shutil.copytree(os.path.join(ROOT, f), os.path.join(d, f),
                            ignore=shutil.ignore_patterns("node_modules", "*.o", "*.d"))
        return d

    def add_include(self, root, rel, header):
        path = os.path.join(root, rel)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write('#include "%s"\n' % header + text)

    def assert_violation(self, rel, header, expect):
        root = self.copy_tree()
        self.assertEqual(self.run_check(root).returncode, 0)  # the copy starts clean
        self.add_include(root, rel, header)
        p = self.run_check(root)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn('%s:1: #include "%s"' % (rel, header), p.stdout)
        self.assertIn(expect, p.stdout)
        self.assertIn("layers: 1 violation", p.stdout)

    def test_service_including_another_service_fails(self):
        self.assert_violation("services/gateway/gateway_api.c", "../policy/policy_server.h",
                              "a program never includes a service's classes")

    def test_service_by_the_old_path_fails(self):
        # services/ is on no include path (but bench/'s): the old "decider/x.h" form names nothing
        self.assert_violation("services/gateway/gateway_api.c", "decider/decider_server.h",
                              "names no file")

    def test_common_including_proto_fails(self):
        self.assert_violation("common/ipl_log.c", "ipl_proto.h", "common/ may include only its own headers")

    def test_library_including_a_higher_one_fails(self):
        self.assert_violation("libs/decision/decider_router.c", "decider_server.h",
                              "libs/decision/ may include only")

    def test_tool_including_a_service_fails(self):
        self.assert_violation("tools/clustersim/main.c", "../../services/sim/sim_api.h",
                              "services/sim/")

    def test_unknown_header_fails(self):
        self.assert_violation("services/sim/main.c", "no_such_header.h", "names no file")


if __name__ == "__main__":
    unittest.main()
