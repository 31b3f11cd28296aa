"""Harness bundles: the versioned text/JSON files (roles, prompts, decoding, router config)."""

from macaronic.harness.bundle import (DEFAULT_BUNDLE, BundleError, HarnessBundle, RoleSpec,
                                      bundle_hash, load_bundle)

__all__ = ["DEFAULT_BUNDLE", "BundleError", "HarnessBundle", "RoleSpec", "bundle_hash", "load_bundle"]
