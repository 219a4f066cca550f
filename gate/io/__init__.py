"""The gate's edge to files and git: fixture trees and seal files, the tree snapshot trials run
from, artifacts written atomically, the ledger file, loading the suite, its checks module and the
reviewed oracle files, and the oracle diff against a base revision. Built on `gate.core` only.
"""
