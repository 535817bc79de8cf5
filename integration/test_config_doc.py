"""docs/configuration.md's flag tables are generated from each service's --help
(tools/gen-config-doc, `make config-doc`) and must not drift from the code."""
import os
import subprocess
import unittest

from lib.harness import BUILD, ROOT


class TestConfigDoc(unittest.TestCase):
    def test_flag_tables_match_help(self):
        p = subprocess.run([os.path.join(ROOT, "tools", "gen-config-doc"), "--check"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, BUILD=os.path.relpath(BUILD, ROOT)))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_every_service_has_a_table(self):
        with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
            doc = f.read()
        for name in ("collector", "aggregator", "policy", "decider", "exporter", "gateway", "sim"):
            self.assertIn("<!-- flags:%s -->" % name, doc)


if __name__ == "__main__":
    unittest.main()
