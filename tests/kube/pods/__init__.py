"""The kube tier's tests of real pods, on one node for the package (conftest.py)."""
