"""`noetlc lsp`: the checker in the editor. ``index`` answers questions about one checked
document (plain Python); ``server`` speaks LSP over stdio with pygls (the `lsp` extra)."""
