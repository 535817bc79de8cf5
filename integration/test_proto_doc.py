"""docs/protocol.md is generated from the catalogue in proto/ipl_proto.h and must not drift."""
import os
import re
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

    def test_crd_strategy_enum_is_the_list(self):
        """crds/inferencepool.yaml's spec.strategy enum is proto/ipl_strategy.h's list, in order."""
        out = subprocess.run([binary("inferplanectl"), "proto-doc"], capture_output=True,
                             timeout=10, check=True).stdout.decode()
        listed = re.findall(r"^- `([a-z0-9-]+)`", out.split("## Strategies", 1)[1], re.M)
        self.assertIn("ttft", listed)
        with open(os.path.join(ROOT, "crds", "inferencepool.yaml")) as f:
            crd = f.read()
        m = re.search(r"strategy:\n(?:.*\n)*?\s+enum: \[([^\]]*)\]", crd)
        self.assertIsNotNone(m, "no spec.strategy enum in crds/inferencepool.yaml")
        enum = [s.strip() for s in m.group(1).split(",")]
        self.assertEqual(enum, listed, "crds/inferencepool.yaml's strategy enum differs from "
                                       "proto/ipl_strategy.h: update the CRD")


if __name__ == "__main__":
    unittest.main()
