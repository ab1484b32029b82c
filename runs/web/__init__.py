"""Request helpers shared by the adapters: current workspace, wire bytes, uploads, page partials."""
