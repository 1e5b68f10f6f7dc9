"""The ``oauth`` entry point."""
