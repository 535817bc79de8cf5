"""docs/protocol.md is generated from the catalogue in proto/ipl_proto.h and must not drift."""
import os
import subprocess
import unittest

from lib.harness import ROOT, binary


class TestProtoDoc(unittest.TestCase):
    def test_protocol_doc_matches_catalogue(self):
        out = subprocess.run([binary("inferplanectl"), "proto-doc"], capture_output=True,
                             timeout=10, check=True).stdout.decode()
        with open(os.path.join(ROOT, "docs", "protocol.md")) as f:
            self.assertEqual(f.read(), out, "docs/protocol.md is stale: run `make proto-doc`")

    def test_every_message_is_documented(self):
        with open(os.path.join(ROOT, "docs", "protocol.md")) as f:
            doc = f.read()
        for name in ("KV_EVENT", "LOAD", "SNAPSHOT_REQ", "SNAPSHOT_END", "POLICY", "POLICY_REQ",
                     "ROUTE_REQ", "ROUTE_REP", "RECORD"):
            self.assertIn("## " + name + "\n", doc)


if __name__ == "__main__":
    unittest.main()
