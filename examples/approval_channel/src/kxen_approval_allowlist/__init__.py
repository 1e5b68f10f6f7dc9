"""kxen-approval-allowlist: an approval channel that approves exactly the fingerprints a user listed.

Set ``KXEN_APPROVAL_ALLOWLIST`` to the path of a file you own with mode 0600 (or 0400), one
fingerprint per line (``#`` starts a comment). Unset, the channel is not configured and passes.
"""

from .hooks import ENV_VAR, read_allowlist

__all__ = ["ENV_VAR", "read_allowlist"]
